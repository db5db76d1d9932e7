//! The table prefix and the SQL that names the tables. The prefix is the only text ever
//! interpolated into SQL, so it is checked to hold identifier characters only.

use backstop_core::StoreError;

/// The prefix used when none is given: tables `backstop_tasks`, `backstop_events`,
/// `backstop_leaders`, `backstop_beats`, `backstop_entities`, `backstop_entity_events`,
/// `backstop_entity_decisions`, `backstop_callbacks`, `backstop_schema`.
pub const DEFAULT_PREFIX: &str = "backstop_";

/// Longest accepted prefix: the longest table name (`…entity_decisions`) stays within MySQL's
/// 64.
pub const MAX_PREFIX_LEN: usize = 40;

/// Checks that `prefix` can be pasted into SQL as part of an unquoted identifier.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), StoreError> {
    if prefix.len() > MAX_PREFIX_LEN {
        return Err(StoreError::Open(
            format!(
                "table prefix {prefix:?} is {} bytes; the limit is {MAX_PREFIX_LEN}",
                prefix.len()
            )
            .into(),
        ));
    }
    if !prefix
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(StoreError::Open(
            format!("table prefix {prefix:?} may contain only ASCII letters, digits and '_'")
                .into(),
        ));
    }
    Ok(())
}

/// The ledger's table names, for one validated prefix.
#[derive(Clone, Debug)]
pub(crate) struct Tables {
    prefix: String,
    tasks: String,
    events: String,
    leaders: String,
    beats: String,
    statement_runs: String,
    entities: String,
    entity_events: String,
    entity_decisions: String,
    callbacks: String,
    schema: String,
}

impl Tables {
    pub(crate) fn new(prefix: &str) -> Result<Self, StoreError> {
        check_prefix(prefix)?;
        Ok(Tables {
            prefix: prefix.to_string(),
            tasks: format!("{prefix}tasks"),
            events: format!("{prefix}events"),
            leaders: format!("{prefix}leaders"),
            beats: format!("{prefix}beats"),
            statement_runs: format!("{prefix}statement_runs"),
            entities: format!("{prefix}entities"),
            entity_events: format!("{prefix}entity_events"),
            entity_decisions: format!("{prefix}entity_decisions"),
            callbacks: format!("{prefix}callbacks"),
            schema: format!("{prefix}schema"),
        })
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `template` with `{tasks}`, `{events}`, `{leaders}`, `{beats}`, `{entities}`,
    /// `{entity_events}`, `{entity_decisions}`, `{callbacks}` and `{schema}` replaced by the table names.
    pub(crate) fn sql(&self, template: &str) -> String {
        template
            .replace("{tasks}", &self.tasks)
            .replace("{events}", &self.events)
            .replace("{leaders}", &self.leaders)
            .replace("{beats}", &self.beats)
            .replace("{statement_runs}", &self.statement_runs)
            .replace("{entities}", &self.entities)
            .replace("{entity_events}", &self.entity_events)
            .replace("{entity_decisions}", &self.entity_decisions)
            .replace("{callbacks}", &self.callbacks)
            .replace("{schema}", &self.schema)
    }

    /// [`Tables::sql`] ready for `sqlx::query`: safe because only the checked prefix is
    /// interpolated; every value is a bound parameter.
    pub(crate) fn q(&self, template: &str) -> sqlx::AssertSqlSafe<String> {
        sqlx::AssertSqlSafe(self.sql(template))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_identifier_characters_only() {
        for ok in ["", "backstop_", "t0_", "App_Ledger_2"] {
            assert!(check_prefix(ok).is_ok(), "{ok:?}");
        }
        for bad in [
            "a-b",
            "x;drop table t;",
            "`x`",
            "a b",
            "é_",
            &"p".repeat(41),
        ] {
            assert!(
                matches!(check_prefix(bad), Err(StoreError::Open(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn templates_name_the_prefixed_tables() {
        let t = Tables::new("app_").unwrap();
        assert_eq!(
            t.sql("SELECT 1 FROM {tasks} JOIN {events} JOIN {schema}"),
            "SELECT 1 FROM app_tasks JOIN app_events JOIN app_schema"
        );
        assert_eq!(
            t.sql("{entities} {entity_events} {entity_decisions}"),
            "app_entities app_entity_events app_entity_decisions"
        );
        let longest = Tables::new(&"p".repeat(MAX_PREFIX_LEN)).unwrap();
        assert!(longest.entity_decisions.len() <= 64);
    }
}
