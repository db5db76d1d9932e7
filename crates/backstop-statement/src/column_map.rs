//! Which column (CSV header name, or JSON field name) holds which part of a record:
//! `key=order_no,amount=amount_cents,currency=ccy,status=state,at=settled_at`.

use std::fmt;
use std::str::FromStr;

/// Where the parts of a record are. Defaults to columns named `key`, `amount`, `currency`,
/// `status` and `at`.
///
/// `key`, `amount` and `currency` are always required. `status` is required unless mapped to
/// nothing (`status=`), which declares a statement of settled records only: every record is
/// then read as succeeded. `at` is optional: when left at its default and the statement has
/// no such column, records carry no time; when named explicitly (`at=col`) the column must
/// exist, and `at=` turns it off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnMap {
    /// The business key, matched against the ledger's task key.
    pub key: String,
    /// The amount, an integer in minor units.
    pub amount: String,
    /// The currency code of the amount.
    pub currency: String,
    /// The provider's status; `None`: the statement has none and every record succeeded.
    pub status: Option<String>,
    /// When the provider recorded it (RFC 3339); `None`: not read.
    pub at: Option<String>,
    /// Whether the `at` column must exist (it was named explicitly).
    pub at_required: bool,
}

impl Default for ColumnMap {
    fn default() -> Self {
        ColumnMap {
            key: "key".into(),
            amount: "amount".into(),
            currency: "currency".into(),
            status: Some("status".into()),
            at: Some("at".into()),
            at_required: false,
        }
    }
}

/// A `--map` value that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid column map {input:?}: {why} (use e.g. key=order_no,amount=cents,currency=ccy,status=state,at=time)"
)]
pub struct BadColumnMap {
    /// The text given.
    pub input: String,
    /// What is wrong with it.
    pub why: String,
}

impl FromStr for ColumnMap {
    type Err = BadColumnMap;

    /// Reads `field=column` pairs separated by commas; fields not named keep their default.
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let bad = |why: String| BadColumnMap {
            input: input.to_string(),
            why,
        };
        let mut map = ColumnMap::default();
        let mut named: Vec<&str> = Vec::new();
        for part in input.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, column) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("{part:?} is not field=column")))?;
            let field = field.trim();
            let column = column.trim();
            if named.contains(&field) {
                return Err(bad(format!("{field} is mapped twice")));
            }
            let required = |column: &str| {
                if column.is_empty() {
                    Err(bad(format!("{field} needs a column")))
                } else {
                    Ok(column.to_string())
                }
            };
            match field {
                "key" => map.key = required(column)?,
                "amount" => map.amount = required(column)?,
                "currency" => map.currency = required(column)?,
                "status" => map.status = (!column.is_empty()).then(|| column.to_string()),
                "at" => {
                    map.at = (!column.is_empty()).then(|| column.to_string());
                    map.at_required = map.at.is_some();
                }
                other => {
                    return Err(bad(format!(
                        "unknown field {other:?} (expected key, amount, currency, status or at)"
                    )));
                }
            }
            named.push(field);
        }
        Ok(map)
    }
}

impl fmt::Display for ColumnMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "key={},amount={},currency={},status={},at={}",
            self.key,
            self.amount,
            self.currency,
            self.status.as_deref().unwrap_or(""),
            self.at.as_deref().unwrap_or("")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let m: ColumnMap = "key=order_no, amount=cents".parse().unwrap();
        assert_eq!(m.key, "order_no");
        assert_eq!(m.amount, "cents");
        assert_eq!(m.currency, "currency");
        assert_eq!(m.status.as_deref(), Some("status"));
        assert!(!m.at_required);
        let m: ColumnMap = "status=,at=settled".parse().unwrap();
        assert_eq!(m.status, None);
        assert_eq!(m.at.as_deref(), Some("settled"));
        assert!(m.at_required);
        assert_eq!("".parse::<ColumnMap>().unwrap(), ColumnMap::default());
    }

    #[test]
    fn rejects_nonsense() {
        for bad in ["key", "key=", "colour=x", "key=a,key=b", "amount="] {
            assert!(bad.parse::<ColumnMap>().is_err(), "{bad}");
        }
    }

    #[test]
    fn displays_round_trip() {
        let m: ColumnMap = "key=k,status=".parse().unwrap();
        let again: ColumnMap = m.to_string().parse().unwrap();
        assert_eq!(again.key, "k");
        assert_eq!(again.status, None);
    }
}
