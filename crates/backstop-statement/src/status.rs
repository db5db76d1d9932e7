//! The provider's status of a record, normalised from the many words providers use.

use serde::Serialize;
use std::collections::HashMap;
use std::fmt;

/// What the provider says happened to a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderStatus {
    /// Done: money moved, message delivered (`success`, `paid`, `settled`, `delivered`, `ok`…).
    Succeeded,
    /// Not finished yet on the provider's side (`pending`, `processing`…).
    Pending,
    /// Did not happen (`failed`, `declined`, `rejected`, `canceled`, `expired`…).
    Failed,
    /// Happened and was undone (`reversed`, `refunded`, `chargeback`, `voided`, `returned`).
    Reversed,
}

impl ProviderStatus {
    /// The lower-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderStatus::Succeeded => "succeeded",
            ProviderStatus::Pending => "pending",
            ProviderStatus::Failed => "failed",
            ProviderStatus::Reversed => "reversed",
        }
    }

    /// Reads a provider's status word: case and surrounding spaces ignored, `-` and inner
    /// spaces read as `_`. `aliases` (keys in that same normal form, see [`normal_form`])
    /// are consulted first, for a provider's own vocabulary. An unknown word is `None`: the
    /// record is then malformed, because guessing would either hide a break or invent one.
    pub fn parse(text: &str, aliases: &HashMap<String, ProviderStatus>) -> Option<Self> {
        let mut buf = [0u8; 32];
        let t = text.trim();
        if t.len() > buf.len() {
            return aliases.get(&normal_form(t)).copied();
        }
        for (slot, b) in buf.iter_mut().zip(t.bytes()) {
            *slot = match b {
                b'-' | b' ' => b'_',
                b => b.to_ascii_lowercase(),
            };
        }
        // Only ASCII bytes were changed, so the buffer is still UTF-8.
        let word = std::str::from_utf8(&buf[..t.len()]).ok()?;
        if !aliases.is_empty()
            && let Some(s) = aliases.get(word)
        {
            return Some(*s);
        }
        Some(match word {
            "success" | "succeeded" | "successful" | "succeed" | "paid" | "settled"
            | "completed" | "complete" | "captured" | "delivered" | "sent" | "ok" | "done"
            | "approved" => ProviderStatus::Succeeded,
            "pending" | "processing" | "in_progress" | "submitted" | "queued" | "created"
            | "accepted" | "authorized" | "authorised" => ProviderStatus::Pending,
            "failed" | "failure" | "fail" | "error" | "declined" | "rejected" | "canceled"
            | "cancelled" | "expired" | "undelivered" | "bounced" => ProviderStatus::Failed,
            "reversed" | "reversal" | "refunded" | "refund" | "chargeback" | "charged_back"
            | "voided" | "void" | "returned" | "recalled" => ProviderStatus::Reversed,
            _ => return None,
        })
    }

    /// Whether the provider says the operation took effect.
    pub fn is_success(self) -> bool {
        self == ProviderStatus::Succeeded
    }
}

/// The normal form of a status word: trimmed, lower-case, `-` and spaces as `_`.
pub fn normal_form(text: &str) -> String {
    text.trim()
        .chars()
        .map(|c| match c {
            '-' | ' ' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

impl fmt::Display for ProviderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Option<ProviderStatus> {
        ProviderStatus::parse(s, &HashMap::new())
    }

    #[test]
    fn normalises_common_words() {
        assert_eq!(parse(" PAID "), Some(ProviderStatus::Succeeded));
        assert_eq!(parse("Delivered"), Some(ProviderStatus::Succeeded));
        assert_eq!(parse("in-progress"), Some(ProviderStatus::Pending));
        assert_eq!(parse("Charged Back"), Some(ProviderStatus::Reversed));
        assert_eq!(parse("REJECTED"), Some(ProviderStatus::Failed));
        assert_eq!(parse("maybe"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse(&"x".repeat(100)), None);
    }

    #[test]
    fn aliases_come_first() {
        let mut aliases = HashMap::new();
        aliases.insert(normal_form("TRADE_FINISHED"), ProviderStatus::Succeeded);
        aliases.insert(normal_form("ok"), ProviderStatus::Pending);
        assert_eq!(
            ProviderStatus::parse("trade_finished", &aliases),
            Some(ProviderStatus::Succeeded)
        );
        assert_eq!(
            ProviderStatus::parse("OK", &aliases),
            Some(ProviderStatus::Pending)
        );
    }
}
