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
    (
        10,
        "collate",
        include_str!("../migrations/0010_collate.sql"),
    ),
    (
        11,
        "schedules",
        include_str!("../migrations/0011_schedules.sql"),
    ),
    (
        12,
        "checkpoints",
        include_str!("../migrations/0012_checkpoints.sql"),
    ),
    (13, "groups", include_str!("../migrations/0013_groups.sql")),
    (14, "pauses", include_str!("../migrations/0014_pauses.sql")),
    (15, "limits", include_str!("../migrations/0015_limits.sql")),
    (16, "rates", include_str!("../migrations/0016_rates.sql")),
    (
        17,
        "due_order",
        include_str!("../migrations/0017_due_order.sql"),
    ),
    (
        18,
        "unpark_by_store",
        include_str!("../migrations/0018_unpark_by_store.sql"),
    ),
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
    run_to(db, known()).await
}

/// Applies the migrations up to `target` (tests stop at an earlier release's schema).
async fn run_to(db: &Db, target: i64) -> Result<(), StoreError> {
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
    for (version, migration, sql) in MIGRATIONS.iter().filter(|m| m.0 > current && m.0 <= target) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PostgresStore, ScratchSchema};
    use backstop_core::Status;
    use backstop_core::store::{
        ClaimParams, GetByKeyParams, Leases, ListParams, Rescue, RescueParams, Tasks,
    };
    use jiff::{Timestamp, ToSpan};

    /// What the previous release (schema version 9) leaves in a ledger: a pending task, one
    /// running under a lease, one held ahead (pending, leased, `run_at` at its lease's end), a
    /// dead letter and a finished one, written as its statements wrote them.
    const PREVIOUS_RELEASE: &str = "
INSERT INTO {schema}.tasks (kind, key, payload) VALUES
    ('k', 'pending', '\\x7b7d'), ('k', 'running', '\\x7b7d'), ('k', 'held', '\\x7b7d'),
    ('k', 'failed', '\\x7b7d'), ('k', 'done', '\\x7b7d');
UPDATE {schema}.tasks SET run_at = now() - interval '1 minute';
UPDATE {schema}.tasks SET status = 'running', attempts = 1, epoch = 1, max_attempts = 3,
    lease_owner = 'old-node', lease_until = now() - interval '10 seconds',
    att_started_at = now() - interval '40 seconds', att_worker = 'old-node'
WHERE key = 'running';
UPDATE {schema}.tasks SET epoch = 1, max_attempts = 3, lease_owner = 'old-node',
    lease_until = now() + interval '1 hour', run_at = now() + interval '1 hour'
WHERE key = 'held';
UPDATE {schema}.tasks SET status = 'failed', attempts = 3, max_attempts = 3,
    reason = 'permanent error', last_error = 'HTTP 400'
WHERE key = 'failed';
UPDATE {schema}.tasks SET status = 'succeeded', attempts = 1, max_attempts = 3
WHERE key = 'done';";

    /// Migration 10 carries a ledger written by the previous release forward: its kinds and
    /// keys now compare as bytes, every task is still found by its (kind, key), a repeat of
    /// one is still deduplicated onto it, and the store claims the pending task, rescues the
    /// running one whose lease expired, leaves the held one to its holder until its lease ends
    /// and lists the dead letter. Its tasks come through the later migrations (12 added the
    /// checkpoint column, 13 the group columns) without a cursor and of no group.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn migration_10_carries_a_previous_release_ledger_forward() {
        const URL_VAR: &str = "BACKSTOP_TEST_POSTGRES_URL";
        if backstop_store_tests::server::skip_without(URL_VAR) {
            return;
        }
        let url = backstop_store_tests::server::server_url(URL_VAR).expect("the test server");
        let scratch = ScratchSchema::new(&url, "upgrade").unwrap();
        let store = PostgresStore::connect(scratch.options()).await.unwrap();
        run_to(&store.db, 9).await.unwrap();
        sqlx::raw_sql(store.db.schema.sql(PREVIOUS_RELEASE))
            .execute(&store.db.pool)
            .await
            .unwrap();

        run(&store.db).await.unwrap();
        let collations: Vec<String> = sqlx::query_scalar(
            "SELECT coalesce(collation_name, '') FROM information_schema.columns
             WHERE table_schema = $1 AND table_name = 'tasks' AND column_name IN ('kind', 'key')",
        )
        .bind(scratch.name())
        .fetch_all(&store.db.pool)
        .await
        .unwrap();
        assert_eq!(collations, ["C", "C"]);
        let again = store
            .get_by_key(GetByKeyParams {
                kind: "k".into(),
                key: "done".into(),
            })
            .await
            .unwrap()
            .expect("found by its kind and key");
        assert_eq!(again.status, Status::Succeeded);
        assert_eq!(
            (again.group, again.group_seq, again.parked),
            (None, None, false),
            "tasks from before migration 13 are of no group"
        );
        let outbox = sqlx::query(store.db.schema.sql(
            "INSERT INTO {schema}.tasks (kind, key, payload) VALUES ('k', 'done', '\\x7b7d')
             ON CONFLICT (kind, key) DO NOTHING",
        ))
        .execute(&store.db.pool)
        .await
        .unwrap();
        assert_eq!(
            outbox.rows_affected(),
            0,
            "the outbox insert still meets its key"
        );

        let now = Timestamp::now();
        let claim = |now: Timestamp| ClaimParams {
            kind: "k".into(),
            limit: 10,
            start: 10,
            owner: "new-node".into(),
            now,
            lease_until: now + 30.seconds(),
            max_attempts: 3,
            on_group_failure: Default::default(),
            per_key: None,
        };
        let claimed = store.claim(claim(now)).await.unwrap();
        let keys: Vec<&str> = claimed.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(
            keys,
            ["pending"],
            "the held task stays its holder's until its lease ends"
        );
        assert_eq!(
            claimed[0].checkpoint, None,
            "no cursor saved before migration 12"
        );
        let rescued = store.rescue(RescueParams { now, limit: 10 }).await.unwrap();
        assert_eq!(rescued.len(), 1);
        assert_eq!(rescued[0].status, Status::Pending);
        let dead = store
            .list(ListParams {
                kind: None,
                key: None,
                status: Some(Status::Failed),
                group: None,
                limit: 10,
                before: None,
            })
            .await
            .unwrap();
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].key, "failed");
        // Past the old hold's lease the held task and the rescued one are claimed.
        let later = now + 2.hours();
        let mut keys: Vec<String> = store
            .claim(claim(later))
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.key)
            .collect();
        keys.sort();
        assert_eq!(keys, ["held", "running"]);
        store.close().await;
        scratch.drop_all().await.unwrap();
    }
}
