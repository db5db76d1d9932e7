//! The outbox contract on SQLite: the application's own connections (a plain sqlx pool on the
//! ledger's database file) insert tasks in their own transactions, with the statement
//! docs/outbox.md documents; a real store and engine deliver them.

use backstop_core::Store;
use backstop_core::store::BoxFuture;
use backstop_core::store::Tasks;
use backstop_core::store::{GetByKeyParams, TimelineParams};
use backstop_store_sqlite::SqliteStore;
use backstop_store_tests::outbox::{self, App, AppTx, Optional};
use jiff::SignedDuration;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use sqlx::{Sqlite, Transaction};
use std::sync::Arc;
use std::time::Duration;

/// The statement docs/outbox.md documents for SQLite.
const INSERT: &str = "INSERT INTO backstop_tasks (kind, key, payload) VALUES (?, ?, ?)
    ON CONFLICT (kind, key) DO NOTHING";

/// docs/outbox.md's insert into an ordering group.
const INSERT_GROUPED: &str =
    "INSERT INTO backstop_tasks (kind, key, payload, grp) VALUES (?, ?, ?, ?)
    ON CONFLICT (kind, key) DO NOTHING";

/// docs/outbox.md's insert with the optional columns.
const INSERT_OPTIONAL: &str =
    "INSERT INTO backstop_tasks (kind, key, payload, max_attempts, run_at, expires_at)
VALUES (?, ?, ?, 3,
        CAST(unixepoch('subsec') * 1000 AS INTEGER) + 60000,
        CAST(unixepoch('subsec') * 1000 AS INTEGER) + 86400000)
ON CONFLICT (kind, key) DO NOTHING";

struct SqliteApp {
    pool: SqlitePool,
}

struct Tx(Transaction<'static, Sqlite>);

impl App for SqliteApp {
    fn begin(&self) -> BoxFuture<'_, Box<dyn AppTx>> {
        Box::pin(async move {
            // BEGIN (deferred), as applications usually do: the write lock is taken by the
            // insert and held until commit.
            let tx = self.pool.begin().await.expect("begin");
            Box::new(Tx(tx)) as Box<dyn AppTx>
        })
    }

    fn concurrent_writers(&self) -> bool {
        false
    }
}

impl AppTx for Tx {
    fn insert<'a>(
        &'a mut self,
        kind: &'a str,
        key: &'a str,
        payload: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            sqlx::query(INSERT)
                .bind(kind)
                .bind(key)
                .bind(payload)
                .execute(&mut *self.0)
                .await
                .expect("outbox insert");
        })
    }

    fn insert_in_group<'a>(
        &'a mut self,
        kind: &'a str,
        key: &'a str,
        payload: &'a str,
        group: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            sqlx::query(INSERT_GROUPED)
                .bind(kind)
                .bind(key)
                .bind(payload)
                .bind(group)
                .execute(&mut *self.0)
                .await
                .expect("outbox insert into a group");
        })
    }

    fn commit(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.0.commit().await.expect("commit") })
    }

    fn rollback(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.0.rollback().await.expect("rollback") })
    }
}

/// A migrated store on a fresh file, and the application's pool on the same file.
async fn fresh() -> (Arc<dyn Store>, SqliteApp, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.db");
    let store = SqliteStore::open(&path.display().to_string())
        .await
        .expect("open store");
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(
            SqliteConnectOptions::new()
                .filename(&path)
                .busy_timeout(Duration::from_secs(10)),
        )
        .await
        .expect("the application's pool");
    (Arc::new(store), SqliteApp { pool }, dir)
}

macro_rules! outbox_cases {
    ($($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (store, app, _dir) = fresh().await;
                outbox::$case(store, &app).await;
            }
        )*
    };
}

outbox_cases!(
    a_rolled_back_insert_creates_nothing,
    a_committed_insert_is_delivered,
    an_inserted_task_gets_the_kinds_attempt_budget,
    a_late_commit_is_still_picked_up,
    the_same_kind_and_key_twice_is_one_task,
    an_inserted_task_has_no_origin_and_takes_redeliveries,
    grouped_inserts_in_concurrent_transactions_run_in_commit_order,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optional_columns_are_kept() {
    let (store, app, _dir) = fresh().await;
    sqlx::query(INSERT_OPTIONAL)
        .bind("outbox.later")
        .bind("l-1")
        .bind(r#"{"n": 1}"#)
        .execute(&app.pool)
        .await
        .expect("insert");
    let want = Optional {
        max_attempts: 3,
        delay: SignedDuration::from_secs(60),
        expires_in: SignedDuration::from_hours(24),
    };
    outbox::optional_columns_are_kept(store, "outbox.later", "l-1", want).await;
}

/// Bytes bound as a BLOB are kept as they are, like text bound as TEXT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_bound_as_bytes_is_kept_exactly() {
    let (store, app, _dir) = fresh().await;
    let bytes: &[u8] = b"\x00\xff binary \xc3\x28";
    sqlx::query(INSERT)
        .bind("outbox.bytes")
        .bind("b-1")
        .bind(bytes)
        .execute(&app.pool)
        .await
        .expect("insert");
    let t = store
        .get_by_key(GetByKeyParams {
            kind: "outbox.bytes".into(),
            key: "b-1".into(),
        })
        .await
        .unwrap();
    assert_eq!(t.expect("the task").payload, bytes);
}

/// A ledger made by 0001 keeps its rows, ids, timelines and indexes through 0002's rebuild.
#[tokio::test]
async fn the_rebuild_keeps_existing_rows_and_indexes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.db");
    let pool = SqlitePool::connect_with(
        SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true),
    )
    .await
    .unwrap();
    // The database as a build that knew only 0001 left it, with a dead letter in it.
    sqlx::raw_sql(include_str!("../migrations/0001_ledger.sql"))
        .execute(&pool)
        .await
        .unwrap();
    sqlx::raw_sql(
        "CREATE TABLE backstop_schema (
             version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
         INSERT INTO backstop_schema VALUES (1, 'ledger', 0);
         INSERT INTO backstop_tasks (seq, id, kind, key, payload, status, attempts,
             max_attempts, run_at, expires_at, epoch, last_error, reason, created_at,
             updated_at, att_started_at, att_ended_at, att_outcome, att_error, att_worker)
         VALUES (7, unhex('01a2268a9bae7182bdd79002051dee58'), 'refund.create', 'refund-77',
             CAST('{\"amount\": 1999}' AS BLOB), 3, 2, 2, 1000, 90000, 2, 'HTTP 400',
             'permanent error', 500, 2000, 1900, 1950, 'failed', 'HTTP 400', 'w1');
         INSERT INTO backstop_events (task_id, type, at, attempt, outcome, error, worker)
         VALUES (unhex('01a2268a9bae7182bdd79002051dee58'), 'attempt', 1200, 1, 'retry',
             'HTTP 503', 'w1');",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = SqliteStore::open(&path.display().to_string())
        .await
        .expect("migrate");
    let t = store
        .get_by_key(GetByKeyParams {
            kind: "refund.create".into(),
            key: "refund-77".into(),
        })
        .await
        .unwrap()
        .expect("the row survived");
    assert_eq!(t.id.to_string(), "01a2268a-9bae-7182-bdd7-9002051dee58");
    assert_eq!(t.payload, br#"{"amount": 1999}"#);
    assert_eq!(
        (t.status, t.attempts, t.max_attempts, t.epoch),
        (backstop_core::Status::Failed, 2, 2, 2)
    );
    assert_eq!(t.created_at.as_millisecond(), 500);
    assert_eq!(t.expires_at.map(|e| e.as_millisecond()), Some(90000));
    assert_eq!(t.reason.as_deref(), Some("permanent error"));
    let tl = store.timeline(TimelineParams { id: t.id }).await.unwrap();
    assert_eq!(
        tl.len(),
        3,
        "created, the earlier attempt, the last attempt: {tl:?}"
    );

    let pool = SqlitePool::connect_with(SqliteConnectOptions::new().filename(&path))
        .await
        .unwrap();
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'backstop_tasks'
         ORDER BY name",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        indexes,
        [
            "backstop_tasks_dead",
            "backstop_tasks_due",
            "backstop_tasks_expiring",
            "backstop_tasks_grp_open",
            "backstop_tasks_leased",
            "backstop_tasks_running_keys",
            "backstop_tasks_unplaced",
            "sqlite_autoindex_backstop_tasks_1",
            "sqlite_autoindex_backstop_tasks_2",
        ]
    );
    let seq: i64 = sqlx::query_scalar("SELECT seq FROM backstop_tasks WHERE key = 'refund-77'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(seq, 7, "rowids are kept");
    sqlx::query(INSERT)
        .bind("refund.create")
        .bind("refund-78")
        .bind("{}")
        .execute(&pool)
        .await
        .expect("the outbox insert works on the rebuilt table");
    let new = store
        .get_by_key(GetByKeyParams {
            kind: "refund.create".into(),
            key: "refund-78".into(),
        })
        .await
        .unwrap()
        .expect("the new task");
    assert_eq!(
        (new.status, new.max_attempts),
        (backstop_core::Status::Pending, 0)
    );
}

/// docs/outbox.md shows exactly the statements tested here.
#[test]
fn readme_documents_these_statements() {
    let readme = include_str!("../../../docs/outbox.md");
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    for sql in [INSERT, INSERT_OPTIONAL] {
        assert!(
            flat(readme).contains(&flat(sql)),
            "docs/outbox.md lacks: {sql}"
        );
    }
}

/// An outbox row waits unplaced until the store's next claim or grouped enqueue. A task of
/// its group that ends meanwhile still unparks the one placed after it, not the unplaced row
/// (which would then be placed behind the parked one, and nothing of the group would run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_while_an_outbox_row_waits_unplaced_unparks_the_placed_task() {
    use backstop_core::group::OnFailure;
    use backstop_core::store::{ClaimParams, EnqueueParams};
    use backstop_core::{AttemptOutcome, Status};
    use backstop_store_tests::fixtures;
    use jiff::Timestamp;

    let (store, app, _dir) = fresh().await;
    let now = Timestamp::now();
    let new = |key: &str| {
        let mut t = backstop_store_tests::groups::grouped(key, "G");
        t.run_at = now;
        t
    };
    let claim = |at: Timestamp| {
        store.claim(ClaimParams {
            kind: "k".into(),
            limit: 10,
            start: 10,
            owner: "w".into(),
            now: at,
            lease_until: at + SignedDuration::from_secs(30),
            max_attempts: 3,
            on_group_failure: OnFailure::Block,
            per_key: None,
        })
    };
    store
        .enqueue(EnqueueParams {
            tasks: vec![new("h1"), new("h2")],
            now,
        })
        .await
        .unwrap();
    let c = claim(now).await.unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].key, "h1");
    // The application's insert commits; no claim or enqueue has placed it yet.
    sqlx::query(INSERT_GROUPED)
        .bind("k")
        .bind("u3")
        .bind("{}")
        .bind("G")
        .execute(&app.pool)
        .await
        .unwrap();
    let done = fixtures::completion(&c[0], Status::Succeeded, AttemptOutcome::Succeeded, now);
    fixtures::complete(&*store, vec![done], now).await;

    let later = now + SignedDuration::from_secs(1);
    let c = claim(later).await.unwrap();
    assert_eq!(
        c.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(),
        ["h2"],
        "h2 is next; u3 is placed behind it"
    );
    let u3 = store
        .get_by_key(GetByKeyParams {
            kind: "k".into(),
            key: "u3".into(),
        })
        .await
        .unwrap()
        .expect("u3");
    assert!(u3.parked, "u3 waits for h2");
}
