//! The table prefix and the SQL that names the tables. The prefix is the only text ever
//! interpolated into SQL, so it is checked to hold identifier characters only.

use backstop_core::StoreError;

/// The prefix used when none is given: tables `backstop_tasks`, `backstop_events`,
/// `backstop_leaders`, `backstop_beats`, `backstop_statement_runs`, `backstop_entities`,
/// `backstop_entity_events`, `backstop_entity_decisions`, `backstop_callbacks`,
/// `backstop_schedules`, `backstop_task_groups`, `backstop_pauses`, `backstop_pause_log`,
/// `backstop_claim_locks`, `backstop_rate_keys`, `backstop_limit_overrides`,
/// `backstop_limit_override_log`, `backstop_schema`.
pub const DEFAULT_PREFIX: &str = "backstop_";

/// Longest accepted prefix: the longest table name (`…limit_override_log`) stays within MySQL's
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

/// Every table of the ledger, by the name after the prefix, in the order the migrations create
/// them (`schema` first: it records the migrations). The one list: SQL templates name tables
/// through it (`{tasks}` …), and dropping a scratch ledger drops exactly these, so that a table
/// added here is both usable in templates and dropped, and one missing here is usable in
/// neither.
pub(crate) const TABLES: [&str; 18] = [
    "schema",
    "tasks",
    "events",
    "leaders",
    "beats",
    "statement_runs",
    "entities",
    "entity_events",
    "entity_decisions",
    "callbacks",
    "schedules",
    "task_groups",
    "pauses",
    "pause_log",
    "claim_locks",
    "rate_keys",
    "limit_overrides",
    "limit_override_log",
];

/// The ledger's table names, for one validated prefix.
#[derive(Clone, Debug)]
pub(crate) struct Tables {
    prefix: String,
    /// `(placeholder, table name)` for each of [`TABLES`], e.g. `("{tasks}", "backstop_tasks")`.
    names: Vec<(String, String)>,
}

impl Tables {
    pub(crate) fn new(prefix: &str) -> Result<Self, StoreError> {
        check_prefix(prefix)?;
        Ok(Tables {
            prefix: prefix.to_string(),
            names: TABLES
                .iter()
                .map(|t| (format!("{{{t}}}"), format!("{prefix}{t}")))
                .collect(),
        })
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The full names of every table of the ledger ([`TABLES`] with the prefix).
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|(_, name)| name.as_str())
    }

    /// `template` with each placeholder of [`TABLES`] (`{tasks}`, `{events}`, `{leaders}`,
    /// `{beats}`, `{statement_runs}`, `{entities}`, `{entity_events}`, `{entity_decisions}`,
    /// `{callbacks}`, `{schedules}`, `{task_groups}`, `{pauses}`, `{pause_log}`,
    /// `{claim_locks}`, `{rate_keys}`, `{limit_overrides}`, `{limit_override_log}`, `{schema}`)
    /// replaced by the table's name.
    pub(crate) fn sql(&self, template: &str) -> String {
        self.names
            .iter()
            .fold(template.to_string(), |sql, (placeholder, name)| {
                sql.replace(placeholder, name)
            })
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
        assert_eq!(
            t.sql("{statement_runs} {leaders} {beats} {callbacks}"),
            "app_statement_runs app_leaders app_beats app_callbacks"
        );
        assert_eq!(
            t.sql("{tasks}_grp {task_groups}"),
            "app_tasks_grp app_task_groups"
        );
        let longest = Tables::new(&"p".repeat(MAX_PREFIX_LEN)).unwrap();
        assert!(longest.names().all(|n| n.len() <= 64));
    }
}
