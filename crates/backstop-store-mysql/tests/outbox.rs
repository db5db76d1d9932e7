//! The outbox contract on MySQL / MariaDB: the application's own connections (a plain sqlx
//! pool, REPEATABLE READ as the server defaults to, a session time zone that is not UTC)
//! insert tasks in their own transactions, with the statement docs/outbox.md documents; a real
//! store and engine deliver them. Each case on tables of its own (a fresh prefix) on the
//! server named by `BACKSTOP_TEST_MYSQL_URL`; without it, each case says `skipped:` and passes.

mod common;

use backstop_core::Store;
use backstop_core::store::BoxFuture;
use backstop_core::store::{CountsParams, GetByKeyParams};
use backstop_store_tests::outbox::{self, App, AppTx, Optional};
use common::{PrefixGuard, skip};
use jiff::SignedDuration;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, MySql, Transaction};
use std::str::FromStr;
use std::sync::Arc;

/// The statement docs/outbox.md documents for MySQL and MariaDB (the default prefix, `backstop_`).
const INSERT: &str = "INSERT INTO backstop_tasks (kind, `key`, payload) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE id = id";

/// docs/outbox.md's insert into an ordering group.
const INSERT_GROUPED: &str =
    "INSERT INTO backstop_tasks (kind, `key`, payload, grp) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE id = id";

/// docs/outbox.md's insert with the optional columns.
const INSERT_OPTIONAL: &str =
    "INSERT INTO backstop_tasks (kind, `key`, payload, max_attempts, run_at, expires_at)
VALUES (?, ?, ?, 3,
        TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) DIV 1000 + 60000,
        TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) DIV 1000 + 86400000)
ON DUPLICATE KEY UPDATE id = id";

/// The other form docs/outbox.md mentions.
const INSERT_IGNORE: &str =
    "INSERT IGNORE INTO backstop_tasks (kind, `key`, payload) VALUES (?, ?, ?)";

/// A statement on the test's tables instead of `backstop_…`.
fn on(prefix: &str, sql: &str) -> AssertSqlSafe<String> {
    AssertSqlSafe(sql.replace("backstop_tasks", &format!("{prefix}tasks")))
}

struct MysqlApp {
    pool: MySqlPool,
    insert: String,
    grouped: String,
}

struct Tx {
    tx: Transaction<'static, MySql>,
    insert: String,
    grouped: String,
}

impl App for MysqlApp {
    fn begin(&self) -> BoxFuture<'_, Box<dyn AppTx>> {
        Box::pin(async move {
            let tx = self.pool.begin().await.expect("begin");
            Box::new(Tx {
                tx,
                insert: self.insert.clone(),
                grouped: self.grouped.clone(),
            }) as Box<dyn AppTx>
        })
    }

    fn concurrent_writers(&self) -> bool {
        true
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
            sqlx::query(AssertSqlSafe(self.insert.clone()))
                .bind(kind)
                .bind(key)
                .bind(payload)
                .execute(&mut *self.tx)
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
            sqlx::query(AssertSqlSafe(self.grouped.clone()))
                .bind(kind)
                .bind(key)
                .bind(payload)
                .bind(group)
                .execute(&mut *self.tx)
                .await
                .expect("outbox insert into a group");
        })
    }

    fn commit(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.tx.commit().await.expect("commit") })
    }

    fn rollback(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.tx.rollback().await.expect("rollback") })
    }
}

/// A migrated store on a fresh prefix, and the application's pool on the same database.
async fn fresh() -> (Arc<dyn Store>, MysqlApp, PrefixGuard) {
    let guard = PrefixGuard::new();
    let store = guard.store().await;
    let options = MySqlConnectOptions::from_str(&guard.options().url)
        .expect("valid test URL")
        .charset("utf8mb4")
        // The defaults keep to UTC whatever the session's zone.
        .timezone(Some("+05:00".to_string()));
    let pool = MySqlPoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .expect("the application's pool");
    let insert = on(&guard.prefix, INSERT).0;
    let grouped = on(&guard.prefix, INSERT_GROUPED).0;
    let app = MysqlApp {
        pool,
        insert,
        grouped,
    };
    (Arc::new(store), app, guard)
}

macro_rules! outbox_cases {
    ($($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                if skip() {
                    return;
                }
                let (store, app, _guard) = fresh().await;
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
    if skip() {
        return;
    }
    let (store, app, guard) = fresh().await;
    sqlx::query(on(&guard.prefix, INSERT_OPTIONAL))
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

/// `INSERT IGNORE` is idempotent by (kind, key) too; bytes bound to `payload` (LONGBLOB) are
/// kept as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_ignore_twice_is_one_task_and_bytes_are_kept() {
    if skip() {
        return;
    }
    let (store, app, guard) = fresh().await;
    let bytes: &[u8] = b"\x00\xff binary \xc3\x28";
    for payload in [bytes, b"other"] {
        sqlx::query(on(&guard.prefix, INSERT_IGNORE))
            .bind("outbox.bytes")
            .bind("b-1")
            .bind(payload)
            .execute(&app.pool)
            .await
            .expect("insert");
    }
    let t = store
        .get_by_key(GetByKeyParams {
            kind: "outbox.bytes".into(),
            key: "b-1".into(),
        })
        .await
        .unwrap();
    assert_eq!(t.expect("the task").payload, bytes);
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        1
    );
}

/// docs/outbox.md shows exactly the statements tested here.
#[test]
fn readme_documents_these_statements() {
    let readme = include_str!("../../../docs/outbox.md");
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    for sql in [INSERT, INSERT_GROUPED, INSERT_OPTIONAL, INSERT_IGNORE] {
        assert!(
            flat(readme).contains(&flat(sql)),
            "docs/outbox.md lacks: {sql}"
        );
    }
}
