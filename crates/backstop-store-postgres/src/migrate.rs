//! The schema (the [`Migrations`] impl): versioned migrations, applied in order inside one transaction that first takes an advisory
//! lock named after the schema: several processes starting at once queue on the lock, and each
//! migration is applied exactly once and recorded in `schema_migrations`; and the write probe
//! behind readiness.

use crate::{Db, PostgresStore, db_err};
use backstop_core::StoreError;
use backstop_core::store::{BoxFuture, Migrations};

impl Migrations for PostgresStore {
    fn migrate(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(run(&self.db))
    }

    fn check_writable(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(check_writable(&self.db))
    }
}

/// Every migration this build knows: (version, name, SQL with `{schema}` placeholders).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "ledger", include_str!("../migrations/0001_ledger.sql")),
    (2, "outbox", include_str!("../migrations/0002_outbox.sql")),
    (3, "leader", include_str!("../migrations/0003_leader.sql")),
    (4, "notify", include_str!("../migrations/0004_notify.sql")),
    (5, "beats", include_str!("../migrations/0005_beats.sql")),
    (
        6,
        "statement_runs",
        include_str!("../migrations/0006_statement_runs.sql"),
    ),
    (
        7,
        "entities",
        include_str!("../migrations/0007_entities.sql"),
    ),
    (
        8,
        "callbacks",
        include_str!("../migrations/0008_callbacks.sql"),
    ),
    (9, "intake", include_str!("../migrations/0009_intake.sql")),
];

/// Serialises migrations of one schema across processes; released at commit or rollback.
const LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended('backstop migrate ' || $1, 0))";

const SCHEMA_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)";

const VERSIONS_EXIST: &str = "SELECT EXISTS (
    SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'schema_migrations')";

const CREATE_VERSIONS: &str = "CREATE TABLE {schema}.schema_migrations (
    version    bigint      PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())";

const CURRENT: &str = "SELECT coalesce(max(version), 0) FROM {schema}.schema_migrations";

const RECORD: &str = "INSERT INTO {schema}.schema_migrations (version, name) VALUES ($1, $2)";

/// The newest version this build knows.
pub(crate) fn known() -> i64 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

async fn run(db: &Db) -> Result<(), StoreError> {
    let name = db.schema.name();
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    sqlx::query(LOCK)
        .bind(name)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    // Checked before creating, so that a role without CREATE on the database can use a schema
    // made for it (and so that no "already exists" notice is logged on every start).
    let schema_exists: bool = sqlx::query_scalar(SCHEMA_EXISTS)
        .bind(name)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    if !schema_exists {
        sqlx::raw_sql(db.schema.sql("CREATE SCHEMA {schema}"))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    let versions_exist: bool = sqlx::query_scalar(VERSIONS_EXIST)
        .bind(name)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    if !versions_exist {
        sqlx::raw_sql(db.schema.sql(CREATE_VERSIONS))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    let current: i64 = sqlx::query_scalar(db.schema.sql(CURRENT))
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    if current > known() {
        return Err(StoreError::SchemaTooNew {
            found: current,
            known: known(),
        });
    }
    for (version, migration, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        sqlx::raw_sql(db.schema.sql(sql))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        sqlx::query(db.schema.sql(RECORD))
            .bind(version)
            .bind(migration)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tracing::info!(version, migration, schema = name, "applied migration");
    }
    tx.commit().await.map_err(db_err)?;
    Ok(())
}

/// The readiness write probe: a beat row, rolled back.
const PROBE: &str = "
INSERT INTO {schema}.beats (name, owner, at, detail) VALUES ('backstop.write-probe', '', now(), '')
ON CONFLICT (name) DO NOTHING";

/// Takes a connection and writes a row in a transaction that is rolled back: fails as a
/// write would on a server that is away, read-only (a standby) or refusing connections.
async fn check_writable(db: &Db) -> Result<(), StoreError> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    sqlx::query(db.schema.sql(PROBE))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.rollback().await.map_err(db_err)
}
