//! What a statement reader yields: well-formed records, malformed rows (never dropped), and
//! the statement's own declaration of its size.

use crate::money::{Money, parse_currency, parse_minor};
use crate::status::ProviderStatus;
use jiff::Timestamp;
use serde::Serialize;
use std::collections::HashMap;

/// One well-formed record of a provider's statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatementRecord {
    /// Where the record starts in the file (1-based; the CSV header is line 1).
    pub line: u64,
    /// The business key, trimmed.
    pub key: String,
    /// The exact amount.
    pub amount: Money,
    /// What the provider says happened.
    pub status: ProviderStatus,
    /// When the provider recorded it, when the statement says.
    pub at: Option<Timestamp>,
}

/// A row that could not be read as a record. Counted and listed in the report, never
/// silently dropped; any makes the verdict `INCOMPLETE`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MalformedRow {
    /// Where the row starts in the file (1-based).
    pub line: u64,
    /// The row's key, when at least that could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Why it could not be read.
    pub reason: String,
    /// The start of the row as written (at most 200 characters).
    pub excerpt: String,
}

/// What a statement says about itself in its trailer: how many data rows it has and the
/// signed sum of their amounts (a control total, over every currency).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Declared {
    /// The number of data rows (well-formed and malformed, trailer excluded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The signed sum of every data row's amount in minor units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount_total: Option<i128>,
}

/// One item of a statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Row {
    /// A well-formed record.
    Record(StatementRecord),
    /// A row that could not be read.
    Malformed(MalformedRow),
    /// The statement's trailer (or one line of it).
    Trailer(Declared),
}

/// The text of a record's fields, as found by a reader, before interpretation.
pub(crate) struct RawFields<'a> {
    pub key: &'a str,
    pub amount: &'a str,
    pub currency: &'a str,
    /// `None`: the statement has no status column (every record succeeded).
    pub status: Option<&'a str>,
    /// `None` or empty: no time.
    pub at: Option<&'a str>,
}

/// Why a row is malformed, and its key when that much was readable.
pub(crate) struct Refusal {
    pub key: Option<String>,
    pub reason: String,
}

impl RawFields<'_> {
    /// Interprets the fields as a record.
    pub(crate) fn into_record(
        self,
        line: u64,
        aliases: &HashMap<String, ProviderStatus>,
    ) -> Result<StatementRecord, Refusal> {
        let key = self.key.trim();
        if key.is_empty() {
            return Err(Refusal {
                key: None,
                reason: "key is empty".into(),
            });
        }
        let refuse = |reason: String| Refusal {
            key: Some(key.to_string()),
            reason,
        };
        let minor = parse_minor(self.amount).map_err(refuse)?;
        let currency = parse_currency(self.currency).map_err(refuse)?;
        let status = match self.status {
            None => ProviderStatus::Succeeded,
            Some(s) => ProviderStatus::parse(s, aliases).ok_or_else(|| {
                refuse(format!(
                    "unknown status {} (map it with a status alias)",
                    crate::money::excerpt(s.trim())
                ))
            })?,
        };
        let at = match self.at.map(str::trim) {
            None | Some("") => None,
            Some(t) => Some(t.parse::<Timestamp>().map_err(|_| {
                refuse(format!(
                    "time {} is not an RFC 3339 timestamp with an offset",
                    crate::money::excerpt(t)
                ))
            })?),
        };
        Ok(StatementRecord {
            line,
            key: key.to_string(),
            amount: Money { minor, currency },
            status,
            at,
        })
    }
}

/// Cuts a row's text to 200 characters for the report.
pub(crate) fn row_excerpt(text: &str) -> String {
    let mut cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}
