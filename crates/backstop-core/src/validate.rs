//! Limits on what callers may put in the ledger.

/// Longest accepted kind name, in bytes.
pub const MAX_KIND_LEN: usize = 128;
/// Longest accepted business key, in bytes.
pub const MAX_KEY_LEN: usize = 512;
/// Default payload limit (1 MiB); configurable.
pub const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;

/// Input that the ledger refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidInput {
    #[error("kind must not be empty")]
    EmptyKind,
    #[error("kind is {0} bytes; the limit is {MAX_KIND_LEN}")]
    KindTooLong(usize),
    #[error("kind {0:?} may contain only letters, digits, '.', '_' and '-'")]
    KindChars(String),
    #[error("key must not be empty")]
    EmptyKey,
    #[error("key is {0} bytes; the limit is {MAX_KEY_LEN}")]
    KeyTooLong(usize),
    #[error("key must not contain control characters")]
    KeyChars,
    #[error("payload is {size} bytes; the limit is {limit}")]
    PayloadTooLarge { size: usize, limit: usize },
    #[error("payload is not valid JSON: {0}")]
    PayloadNotJson(String),
    #[error("max_attempts must be between 1 and 1000, got {0}")]
    MaxAttempts(u32),
}

/// Checks a kind name.
pub fn kind(kind: &str) -> Result<(), InvalidInput> {
    if kind.is_empty() {
        return Err(InvalidInput::EmptyKind);
    }
    if kind.len() > MAX_KIND_LEN {
        return Err(InvalidInput::KindTooLong(kind.len()));
    }
    if !kind
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(InvalidInput::KindChars(kind.to_string()));
    }
    Ok(())
}

/// Checks a business key.
pub fn key(key: &str) -> Result<(), InvalidInput> {
    if key.is_empty() {
        return Err(InvalidInput::EmptyKey);
    }
    if key.len() > MAX_KEY_LEN {
        return Err(InvalidInput::KeyTooLong(key.len()));
    }
    if key.chars().any(char::is_control) {
        return Err(InvalidInput::KeyChars);
    }
    Ok(())
}

/// Checks a JSON payload against the size limit and for well-formedness.
pub fn json_payload(payload: &[u8], limit: usize) -> Result<(), InvalidInput> {
    if payload.len() > limit {
        return Err(InvalidInput::PayloadTooLarge {
            size: payload.len(),
            limit,
        });
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(payload)
        .map_err(|e| InvalidInput::PayloadNotJson(e.to_string()))?;
    Ok(())
}

/// Checks an attempt budget.
pub fn max_attempts(n: u32) -> Result<(), InvalidInput> {
    if (1..=1000).contains(&n) {
        Ok(())
    } else {
        Err(InvalidInput::MaxAttempts(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_empty_long_and_odd_names() {
        assert_eq!(kind(""), Err(InvalidInput::EmptyKind));
        assert!(kind(&"a".repeat(129)).is_err());
        assert!(kind("sms send").is_err());
        assert!(kind("sms.send").is_ok());
        assert_eq!(key(""), Err(InvalidInput::EmptyKey));
        assert!(key(&"k".repeat(513)).is_err());
        assert!(key("a\nb").is_err());
        assert!(key("order-123").is_ok());
    }

    #[test]
    fn payload_must_be_json_and_small_enough() {
        assert!(json_payload(br#"{"a":1}"#, 100).is_ok());
        assert!(matches!(
            json_payload(b"{nope", 100),
            Err(InvalidInput::PayloadNotJson(_))
        ));
        assert!(matches!(
            json_payload(&[b' '; 101], 100),
            Err(InvalidInput::PayloadTooLarge { .. })
        ));
    }
}
