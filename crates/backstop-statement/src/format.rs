//! The two statement formats: CSV with a header row, and JSON lines.

use serde::Serialize;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// How a statement file is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StatementFormat {
    /// RFC 4180 CSV (quoted fields, embedded commas and newlines) with a header row naming
    /// the columns. The default.
    #[default]
    Csv,
    /// One JSON object per line; blank lines are skipped.
    Jsonl,
}

impl StatementFormat {
    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            StatementFormat::Csv => "csv",
            StatementFormat::Jsonl => "jsonl",
        }
    }

    /// The format a file name suggests: `.jsonl`, `.ndjson` and `.json` are JSON lines,
    /// anything else is CSV.
    pub fn guess_from_path(path: &Path) -> StatementFormat {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("jsonl" | "ndjson" | "json") => StatementFormat::Jsonl,
            _ => StatementFormat::Csv,
        }
    }
}

impl fmt::Display for StatementFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A format name that is neither `csv` nor `jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown statement format {0:?} (expected csv or jsonl)")]
pub struct UnknownFormat(pub String);

impl FromStr for StatementFormat {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "csv" => Ok(StatementFormat::Csv),
            "jsonl" | "ndjson" => Ok(StatementFormat::Jsonl),
            _ => Err(UnknownFormat(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_guesses() {
        assert_eq!("csv".parse(), Ok(StatementFormat::Csv));
        assert_eq!("JSONL".parse(), Ok(StatementFormat::Jsonl));
        assert!("xml".parse::<StatementFormat>().is_err());
        assert_eq!(
            StatementFormat::guess_from_path(Path::new("a/b.ndjson")),
            StatementFormat::Jsonl
        );
        assert_eq!(
            StatementFormat::guess_from_path(Path::new("stmt.CSV")),
            StatementFormat::Csv
        );
    }
}
