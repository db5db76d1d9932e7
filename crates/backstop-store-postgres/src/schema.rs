//! The schema that holds the ledger's tables. Its name is the only text ever interpolated into
//! SQL, so it is checked to be a plain identifier first; every value is a bound parameter.

use backstop_core::StoreError;
use sqlx::AssertSqlSafe;

/// A validated schema name and its quoted form for SQL.
#[derive(Clone, Debug)]
pub(crate) struct Schema {
    name: String,
    quoted: String,
}

/// PostgreSQL truncates longer identifiers (NAMEDATALEN - 1).
const MAX_LEN: usize = 63;

impl Schema {
    /// Accepts lower-case ASCII letters, digits and `_`, not starting with a digit, at most 63
    /// bytes: a name that means the same quoted or not, so that `psql` users need no quotes.
    pub(crate) fn new(name: &str) -> Result<Self, StoreError> {
        let plain = name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        let starts_well = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
        if !(plain && starts_well && name.len() <= MAX_LEN && !name.starts_with("pg_")) {
            return Err(StoreError::Open(
                format!(
                    "schema {name:?}: use 1 to {MAX_LEN} lower-case letters, digits and _ \
                 (not starting with a digit or pg_)"
                )
                .into(),
            ));
        }
        Ok(Schema {
            name: name.to_string(),
            quoted: format!("\"{name}\""),
        })
    }

    /// The schema's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// `template` with every `{schema}` replaced by the quoted schema name. Templates are the
    /// crate's own constants; values never go through here.
    pub(crate) fn sql(&self, template: &str) -> AssertSqlSafe<String> {
        AssertSqlSafe(template.replace("{schema}", &self.quoted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_identifiers_pass() {
        for ok in ["backstop", "_x", "ledger_2", &"a".repeat(63)] {
            assert!(Schema::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "2x",
            "Backstop",
            "a-b",
            "a.b",
            "a\"b",
            "a b",
            "pg_catalog",
            "é",
            &"a".repeat(64),
        ] {
            assert!(Schema::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn templates_get_the_quoted_name() {
        let s = Schema::new("ledger").unwrap();
        assert_eq!(
            s.sql("SELECT 1 FROM {schema}.tasks JOIN {schema}.events").0,
            "SELECT 1 FROM \"ledger\".tasks JOIN \"ledger\".events"
        );
    }
}
