//! The schema (the [`Migrations`] impl): versioned migrations, embedded in the binary and
//! recorded in `{prefix}schema`; and the write probe behind readiness.
//!
//! MySQL commits each DDL statement by itself, so migrations cannot run in one transaction:
//! instead every process takes a server-wide named lock (`GET_LOCK`) for this database and
//! prefix first, so that several processes starting at once apply each migration exactly
//! once; the others wait and then find nothing left to do. Each statement is written to be
//! repeatable (`IF NOT EXISTS`, `MODIFY COLUMN` restating a whole column, or an `ADD COLUMN`
//! of one column whose "duplicate column" error says it is done), so a migration interrupted
//! half way is finished by the next run.

use crate::row::to_ms;
use crate::tx::{db_err, error_number};
use crate::{Db, MysqlStore};
use backstop_core::StoreError;
use backstop_core::store::Cause;
use backstop_core::store::{BoxFuture, Migrations};
use sqlx::MySqlConnection;
use sqlx::pool::PoolConnection;

impl Migrations for MysqlStore {
    fn migrate(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(run(&self.db))
    }

    fn check_writable(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(check_writable(&self.db))
    }
}

/// Every migration this build knows: (version, name, SQL).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "ledger", include_str!("../migrations/0001_ledger.sql")),
    (2, "outbox", include_str!("../migrations/0002_outbox.sql")),
    (3, "leader", include_str!("../migrations/0003_leader.sql")),
    (4, "beats", include_str!("../migrations/0004_beats.sql")),
    (
        5,
        "statement_runs",
        include_str!("../migrations/0005_statement_runs.sql"),
    ),
    (
        6,
        "entities",
        include_str!("../migrations/0006_entities.sql"),
    ),
    (
        7,
        "callbacks",
        include_str!("../migrations/0007_callbacks.sql"),
    ),
    (8, "intake", include_str!("../migrations/0008_intake.sql")),
    (
        9,
        "schedules",
        include_str!("../migrations/0009_schedules.sql"),
    ),
    (
        10,
        "checkpoints",
        include_str!("../migrations/0010_checkpoints.sql"),
    ),
    (11, "groups", include_str!("../migrations/0011_groups.sql")),
    (12, "pauses", include_str!("../migrations/0012_pauses.sql")),
    (13, "limits", include_str!("../migrations/0013_limits.sql")),
    (14, "rates", include_str!("../migrations/0014_rates.sql")),
];

/// ER_DUP_FIELDNAME: the column an `ADD COLUMN` adds is there already.
const DUPLICATE_COLUMN: u16 = 1060;

/// How long a process waits for another one's migration before giving up.
const LOCK_WAIT_SECS: i64 = 120;

/// The lock's name: one per database and prefix, within MySQL's 64 characters.
const LOCK_NAME: &str = "CONCAT('backstop:', SHA1(CONCAT(COALESCE(DATABASE(), ''), '.', ?)))";

/// The newest schema version this build knows.
pub(crate) fn known() -> i64 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

async fn run(db: &Db) -> Result<(), StoreError> {
    let mut conn = db.pool.acquire().await.map_err(db_err)?;
    let prefix = db.tables.prefix();
    let got: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT GET_LOCK({LOCK_NAME}, ?)"
    )))
    .bind(prefix)
    .bind(LOCK_WAIT_SECS)
    .fetch_one(&mut *conn)
    .await
    .map_err(db_err)?;
    if got != Some(1) {
        return Err(StoreError::Open(
            format!("another process held the migration lock for {LOCK_WAIT_SECS} s").into(),
        ));
    }
    let result = apply(db, &mut conn).await;
    release(&mut conn, prefix).await;
    result
}

/// Gives the lock back; a connection that cannot is closed instead (which releases it).
async fn release(conn: &mut PoolConnection<sqlx::MySql>, prefix: &str) {
    let released = sqlx::query(sqlx::AssertSqlSafe(format!("DO RELEASE_LOCK({LOCK_NAME})")))
        .bind(prefix)
        .execute(&mut **conn)
        .await;
    if let Err(e) = released {
        tracing::warn!(error = %e, "could not release the migration lock; closing the connection");
        conn.close_on_drop();
    }
}

async fn apply(db: &Db, conn: &mut MySqlConnection) -> Result<(), StoreError> {
    let t = &db.tables;
    sqlx::raw_sql(t.q("CREATE TABLE IF NOT EXISTS {schema} (
            version    BIGINT       NOT NULL PRIMARY KEY,
            name       VARCHAR(255) NOT NULL,
            applied_at BIGINT       NOT NULL
        ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4"))
    .execute(&mut *conn)
    .await
    .map_err(db_err)?;
    let current: i64 = sqlx::query_scalar(t.q("SELECT COALESCE(MAX(version), 0) FROM {schema}"))
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err)?;
    let known = known();
    if current > known {
        return Err(StoreError::SchemaTooNew {
            found: current,
            known,
        });
    }
    for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        for statement in statements(sql) {
            match sqlx::raw_sql(t.q(statement)).execute(&mut *conn).await {
                Ok(_) => {}
                // A statement adds one column at most: run again after an interruption, it
                // finds that column already added.
                Err(e)
                    if statement.contains("ADD COLUMN")
                        && error_number(&e) == Some(DUPLICATE_COLUMN) => {}
                Err(e) => {
                    return Err(StoreError::Open(Cause::with_context(
                        format_args!("migration {version} ({name})"),
                        e,
                    )));
                }
            }
        }
        sqlx::query(t.q("INSERT INTO {schema} (version, name, applied_at) VALUES (?, ?, ?)"))
            .bind(version)
            .bind(name)
            .bind(to_ms(jiff::Timestamp::now()))
            .execute(&mut *conn)
            .await
            .map_err(db_err)?;
        tracing::info!(version, name, prefix = t.prefix(), "applied migration");
    }
    Ok(())
}

/// The statements of a migration file: each ends at a `;` that ends a line, except inside a
/// trigger's body, which runs from a line `BEGIN` to a line `END;` (its own statements end
/// in `;` too, and the server takes the whole `CREATE TRIGGER` as one statement).
fn statements(sql: &str) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let (mut start, mut at, mut in_body) = (0, 0, false);
    for line in sql.split_inclusive('\n') {
        let text = line.trim_end_matches('\n');
        in_body |= text.trim() == "BEGIN";
        let ends = if in_body {
            text.trim() == "END;"
        } else {
            text.ends_with(';')
        };
        if ends {
            // Up to the `;`, which the server does not want.
            parts.push(&sql[start..at + text.len() - 1]);
            start = at + line.len();
            in_body = false;
        }
        at += line.len();
    }
    parts.push(&sql[start..]);
    parts.into_iter().map(str::trim).filter(|s| {
        s.lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"))
    })
}

/// The readiness write probe: a beat row, rolled back.
const PROBE: &str = "INSERT IGNORE INTO {beats} (name, owner, at, detail) VALUES ('backstop.write-probe', '', 0, '')";

/// Takes a connection and writes a row in a transaction that is rolled back: fails as a
/// write would on a server that is away, read-only or refusing connections.
async fn check_writable(db: &Db) -> Result<(), StoreError> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    sqlx::query(db.tables.q(PROBE))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.rollback().await.map_err(db_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_split_into_whole_statements() {
        for (version, _, sql) in MIGRATIONS {
            let parts: Vec<&str> = statements(sql).collect();
            assert!(!parts.is_empty(), "migration {version}");
            // Each statement without its comment lines.
            let code: Vec<String> = parts
                .iter()
                .map(|p| {
                    let lines = p.lines().filter(|l| !l.trim_start().starts_with("--"));
                    lines.collect::<Vec<_>>().join("\n")
                })
                .collect();
            for (i, p) in code.iter().enumerate() {
                if p.starts_with("CREATE TRIGGER") {
                    // Repeatable: the statement before drops the trigger if it is there.
                    let name = p.split_whitespace().skip_while(|w| *w != "TRIGGER").nth(1);
                    let drop = format!("DROP TRIGGER IF EXISTS {}", name.unwrap());
                    assert!(i > 0 && code[i - 1] == drop, "not repeatable: {p}");
                    assert!(p.ends_with("END"), "a whole trigger: {p}");
                    continue;
                }
                assert!(!p.contains(';'), "a ';' inside a statement: {p}");
                // MODIFY COLUMN restates a column whole: the same again changes nothing. An
                // ADD COLUMN of one column fails with 1060 when run again, taken as done.
                assert!(
                    p.contains("IF NOT EXISTS")
                        || p.starts_with("DROP TRIGGER IF EXISTS")
                        || p.contains("MODIFY COLUMN")
                        || p.matches("ADD COLUMN").count() == 1,
                    "not repeatable: {p}"
                );
            }
        }
        assert_eq!(statements(MIGRATIONS[0].2).count(), 2);
        assert_eq!(statements(MIGRATIONS[10].2).count(), 8);
    }

    #[test]
    fn the_trigger_parks_at_the_parked_instant() {
        let ms = backstop_core::group::PARKED_RUN_AT.as_millisecond();
        assert!(MIGRATIONS[10].2.contains(&format!("NEW.run_at = {ms};")));
    }
}
