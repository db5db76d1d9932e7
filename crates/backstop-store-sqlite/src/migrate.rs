//! The schema (the [`Migrations`] impl): versioned migrations, applied in order inside one
//! `BEGIN IMMEDIATE` transaction, so that several processes starting at once apply each
//! exactly once; and the write probe behind readiness: a transaction that takes the write
//! lock and a row that needs new pages, rolled back. It fails as a real write would on a
//! read-only file, a file at its page limit (`max_page_count`) or locked by another process
//! past the busy timeout. Pages are allocated in memory until a commit, so a file system
//! that is full while the file still has room shows only when a commit fails.

use crate::SqliteStore;
use crate::db_err;
use crate::raw::{self, Value};
use crate::row::jiff_ms::to_ms;
use backstop_core::StoreError;
use backstop_core::store::{BoxFuture, Migrations};
use sqlx::{Connection, SqliteConnection};

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
    (
        15,
        "grp_open_comparisons",
        include_str!("../migrations/0015_grp_open_comparisons.sql"),
    ),
    (
        16,
        "grp_live",
        include_str!("../migrations/0016_grp_live.sql"),
    ),
];

impl Migrations for SqliteStore {
    fn migrate(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            run(&mut w).await
        })
    }

    fn check_writable(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            check_writable(&mut w).await
        })
    }
}

async fn run(conn: &mut SqliteConnection) -> Result<(), StoreError> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS backstop_schema (
            version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
    )
    .execute(&mut *tx)
    .await
    .map_err(db_err)?;
    let current: i64 = sqlx::query_scalar("SELECT coalesce(max(version), 0) FROM backstop_schema")
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    let known = MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
    if current > known {
        return Err(StoreError::SchemaTooNew {
            found: current,
            known,
        });
    }
    for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        sqlx::raw_sql(*sql)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        sqlx::query("INSERT INTO backstop_schema (version, name, applied_at) VALUES (?, ?, ?)")
            .bind(version)
            .bind(name)
            .bind(to_ms(jiff::Timestamp::now()))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tracing::info!(version, name, "applied migration");
    }
    tx.commit().await.map_err(db_err)?;
    Ok(())
}

/// A row larger than the 8 KiB pages backstop creates: it needs overflow pages, which a full
/// file cannot give.
const PROBE: &str = "
INSERT OR REPLACE INTO backstop_beats (name, owner, at, detail)
VALUES ('backstop.write-probe', '', 0, zeroblob(?1))";

/// Bytes of the probe row: two pages' worth.
const PROBE_BYTES: i64 = 16_384;

async fn check_writable(conn: &mut SqliteConnection) -> Result<(), StoreError> {
    raw::rolled_back(conn, |db| {
        db.prepare(PROBE)?.execute(&[Value::Int(PROBE_BYTES)])?;
        Ok(())
    })
    .await
}
