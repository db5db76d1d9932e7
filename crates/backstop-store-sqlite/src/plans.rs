//! The planner keeps using the indexes the per-task statements were written for: a full scan
//! there would cost a pass over the ledger per task.

use crate::{SqliteOptions, SqliteStore};
use sqlx::{AssertSqlSafe, Row};

/// The rows of `explain` (`EXPLAIN` or `EXPLAIN QUERY PLAN`) of `sql`, column `column` of each.
async fn explain(store: &SqliteStore, explain: &str, sql: &str, column: &str) -> Vec<String> {
    let mut w = store.inner.writer.lock().await;
    let rows = sqlx::query(AssertSqlSafe(format!("{explain} {sql}")))
        .fetch_all(&mut *w)
        .await
        .unwrap();
    rows.iter().map(|r| r.get::<String, _>(column)).collect()
}

async fn plan(store: &SqliteStore, sql: &str) -> String {
    explain(store, "EXPLAIN QUERY PLAN", sql, "detail")
        .await
        .join("\n")
}

/// A fresh ledger with every migration applied, and its directory.
async fn migrated() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(SqliteOptions::new(dir.path().join("plans.db")))
        .await
        .unwrap();
    (store, dir)
}

#[tokio::test]
async fn per_task_statements_use_their_indexes() {
    let (store, _dir) = migrated().await;
    let mut cases = vec![
        (
            crate::claim::PICK,
            "SEARCH backstop_tasks USING INDEX backstop_tasks_due (kind=? AND run_at<?)",
        ),
        (
            crate::enqueue::EXISTING,
            "SEARCH backstop_tasks USING INDEX sqlite_autoindex_backstop_tasks_2 (kind=? AND key=?)",
        ),
    ];
    for sql in [
        crate::complete::FINISH,
        crate::complete::RETRY,
        crate::complete::RECORD_RETRY,
        crate::start::START,
    ] {
        cases.push((
            sql,
            "SEARCH backstop_tasks USING INDEX sqlite_autoindex_backstop_tasks_1 (id=?)",
        ));
    }
    for sql in crate::claim::LEASE_SQL
        .iter()
        .chain(crate::claim::HOLD_SQL.iter())
    {
        cases.push((
            sql,
            "SEARCH backstop_tasks USING INTEGER PRIMARY KEY (rowid=?)",
        ));
    }
    for sql in [crate::lease::HEARTBEAT, crate::lease::RELEASE_PICK] {
        cases.push((
            sql,
            "SEARCH t USING INDEX sqlite_autoindex_backstop_tasks_1 (id=?)",
        ));
    }
    cases.push((
        crate::claim_limited::RUNNING_KEYS,
        "SEARCH backstop_tasks USING COVERING INDEX backstop_tasks_running_keys (kind=?",
    ));
    cases.push((
        crate::claim_limited::HOST_RUNNING,
        "SEARCH backstop_tasks USING INDEX backstop_tasks_leased (lease_until>?)",
    ));
    cases.push((
        crate::claim_limited::PICK_AFTER,
        "SEARCH backstop_tasks USING INDEX backstop_tasks_due",
    ));
    cases.push((
        crate::rescue::RESCUE_PICK,
        "SEARCH backstop_tasks USING INDEX backstop_tasks_leased (lease_until<?)",
    ));
    cases.push((
        crate::rescue::EXPIRE_PICK,
        "SEARCH backstop_tasks USING COVERING INDEX backstop_tasks_expiring",
    ));
    cases.push((
        crate::groups::OPEN_MANY,
        "SEARCH o EXISTS USING INDEX backstop_tasks_grp_open (kind=? AND grp_live=?",
    ));
    cases.push((crate::groups::TAKE_MANY, "SCAN j VIRTUAL TABLE"));
    for (sql, expected) in cases {
        let plan = plan(&store, sql).await;
        // The only scans allowed are of the JSON lists of ids a statement is given.
        let scans_a_table = plan
            .lines()
            .any(|l| l.starts_with("SCAN") && !l.contains("VIRTUAL TABLE"));
        assert!(
            plan.contains(expected) && !scans_a_table,
            "{sql}\n=> {plan}"
        );
    }
}

/// How many temporary b-trees a statement's bytecode opens each time it runs.
async fn temporary_tables(store: &SqliteStore, sql: &str) -> usize {
    let ops = explain(store, "EXPLAIN", sql, "opcode").await;
    ops.iter().filter(|op| *op == "OpenEphemeral").count()
}

/// A status change of a grouped task evaluates the open-task index's condition for the old and
/// the new row; written as `IN (0, 1, 3)` it built a temporary b-tree on every execution
/// (5.1 µs an UPDATE against 2.1). None of the per-task writes builds one now; a claim's lease
/// builds at most one, for its list of rows.
#[tokio::test]
async fn per_task_status_changes_build_no_temporary_tables() {
    let (store, _dir) = migrated().await;
    for sql in [
        crate::complete::FINISH,
        crate::complete::RETRY,
        crate::complete::RECORD_RETRY,
        crate::start::START,
    ] {
        assert_eq!(temporary_tables(&store, sql).await, 0, "{sql}");
    }
    for sql in crate::claim::LEASE_SQL
        .iter()
        .chain(crate::claim::HOLD_SQL.iter())
    {
        // One for the list of rows (`seq IN (…)`), none with a single row.
        let n = temporary_tables(&store, sql).await;
        assert!(n <= 1, "{n} temporary tables: {sql}");
    }
}

/// Whether a statement's bytecode opens the index `index` (a read or a write cursor on its root
/// page): SQLite opens an index only to change or read its entries.
async fn opens_index(store: &SqliteStore, sql: &str, index: &str) -> bool {
    let root: i64 = {
        let mut w = store.inner.writer.lock().await;
        sqlx::query_scalar("SELECT rootpage FROM sqlite_schema WHERE type = 'index' AND name = ?")
            .bind(index)
            .fetch_one(&mut *w)
            .await
            .unwrap()
    };
    let mut w = store.inner.writer.lock().await;
    let rows = sqlx::query(AssertSqlSafe(format!("EXPLAIN {sql}")))
        .fetch_all(&mut *w)
        .await
        .unwrap();
    rows.iter().any(|r| {
        let op: String = r.get("opcode");
        (op == "OpenWrite" || op == "OpenRead") && r.get::<i64, _>("p2") == root
    })
}

/// A claim, a start or a retry changes a grouped task's status but not whether it may hold
/// its group: none of them touches the index of a group's open tasks (with the status in its
/// condition, each deleted and re-inserted the task's entry). An end that lets the group go
/// removes the entry, so it opens it.
#[tokio::test]
async fn status_changes_that_keep_a_task_open_leave_the_groups_index_alone() {
    let (store, _dir) = migrated().await;
    let index = "backstop_tasks_grp_open";
    for sql in crate::claim::LEASE_SQL
        .iter()
        .chain(crate::claim::HOLD_SQL.iter())
        .map(String::as_str)
        .chain([crate::start::START, crate::complete::RETRY])
    {
        assert!(!opens_index(&store, sql, index).await, "{sql}");
    }
    assert!(opens_index(&store, crate::complete::FINISH, index).await);
}
