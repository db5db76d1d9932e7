//! Versioned migrations, applied in order inside one `BEGIN IMMEDIATE` transaction, so that
//! several processes starting at once apply each exactly once.

use crate::db_err;
use crate::row::jiff_ms::to_ms;
use backstop_core::StoreError;
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
];

pub(crate) async fn run(conn: &mut SqliteConnection) -> Result<(), StoreError> {
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
