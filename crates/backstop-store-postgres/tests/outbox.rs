//! The outbox contract on PostgreSQL: the application's own connections (a plain sqlx pool)
//! insert tasks in their own transactions, with the statement docs/outbox.md documents; a real
//! store and engine deliver them. Each case on a fresh schema of the server named by
//! `BACKSTOP_TEST_POSTGRES_URL`; without it, each case says `skipped:` and passes.

mod common;

use backstop_core::Store;
use backstop_core::store::BoxFuture;
use backstop_core::store::GetByKeyParams;
use backstop_store_tests::outbox::{self, App, AppTx, Optional};
use common::{SchemaGuard, skip};
use jiff::SignedDuration;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Postgres, Transaction};
use std::sync::Arc;

/// The statement docs/outbox.md documents for PostgreSQL (the default schema, `backstop`).
const INSERT: &str = "INSERT INTO backstop.tasks (kind, key, payload)
VALUES ($1, $2, convert_to($3, 'UTF8'))
ON CONFLICT (kind, key) DO NOTHING";

/// docs/outbox.md's insert into an ordering group.
const INSERT_GROUPED: &str = "INSERT INTO backstop.tasks (kind, key, payload, grp)
VALUES ($1, $2, convert_to($3, 'UTF8'), $4)
ON CONFLICT (kind, key) DO NOTHING";

/// docs/outbox.md's insert with the optional columns.
const INSERT_OPTIONAL: &str =
    "INSERT INTO backstop.tasks (kind, key, payload, max_attempts, run_at, expires_at)
VALUES ($1, $2, convert_to($3, 'UTF8'), 3, now() + interval '1 minute', now() + interval '1 day')
ON CONFLICT (kind, key) DO NOTHING";

/// A statement on the test's schema instead of `backstop`.
fn on(schema: &str, sql: &str) -> AssertSqlSafe<String> {
    AssertSqlSafe(sql.replace("backstop.tasks", &format!("{schema}.tasks")))
}

/// The documented statements on the test's schema.
#[derive(Clone)]
struct Statements {
    insert: String,
    grouped: String,
}

struct PgApp {
    pool: PgPool,
    sql: Statements,
}

struct Tx {
    tx: Transaction<'static, Postgres>,
    sql: Statements,
}

impl App for PgApp {
    fn begin(&self) -> BoxFuture<'_, Box<dyn AppTx>> {
        Box::pin(async move {
            let tx = self.pool.begin().await.expect("begin");
            Box::new(Tx {
                tx,
                sql: self.sql.clone(),
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
            sqlx::query(AssertSqlSafe(self.sql.insert.clone()))
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
            sqlx::query(AssertSqlSafe(self.sql.grouped.clone()))
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

/// A migrated store on a fresh schema, and the application's pool on the same database.
async fn fresh() -> (Arc<dyn Store>, PgApp, SchemaGuard) {
    let guard = SchemaGuard::new();
    let store = guard.store().await;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(&guard.options().url)
        .await
        .expect("the application's pool");
    let sql = Statements {
        insert: on(&guard.schema, INSERT).0,
        grouped: on(&guard.schema, INSERT_GROUPED).0,
    };
    (Arc::new(store), PgApp { pool, sql }, guard)
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
    sqlx::query(on(&guard.schema, INSERT_OPTIONAL))
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

/// An application that has the payload as bytes binds them to `payload` (bytea) as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_bound_as_bytes_is_kept_exactly() {
    if skip() {
        return;
    }
    let (store, app, guard) = fresh().await;
    let bytes: &[u8] = b"\x00\xff binary \\x41 \xc3\x28";
    let sql = "INSERT INTO backstop.tasks (kind, key, payload) VALUES ($1, $2, $3)
        ON CONFLICT (kind, key) DO NOTHING";
    sqlx::query(on(&guard.schema, sql))
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

/// An application role with only the privileges docs/outbox.md names (`USAGE` on the schema,
/// `INSERT` and `SELECT (kind, key)` on `tasks`) creates tasks the store claims: nothing the
/// insert sets off (the wake-up trigger, the group trigger that numbers and parks a task of a
/// group) needs more of the application.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_role_with_the_documented_privileges_only_can_insert() {
    if skip() {
        return;
    }
    let (store, app, guard) = fresh().await;
    let role = format!("outbox_{}", guard.schema);
    let setup = format!(
        "CREATE ROLE {role}; GRANT USAGE ON SCHEMA {schema} TO {role};
         GRANT INSERT, SELECT (kind, key) ON {schema}.tasks TO {role};",
        schema = guard.schema
    );
    sqlx::raw_sql(AssertSqlSafe(setup))
        .execute(&app.pool)
        .await
        .expect("the role");
    let inserted = async {
        let mut tx = app.pool.begin().await?;
        sqlx::raw_sql(AssertSqlSafe(format!("SET LOCAL ROLE {role}")))
            .execute(&mut *tx)
            .await?;
        sqlx::query(on(&guard.schema, INSERT))
            .bind("outbox.role")
            .bind("r-1")
            .bind("{}")
            .execute(&mut *tx)
            .await?;
        for key in ["g-1", "g-2"] {
            sqlx::query(on(&guard.schema, INSERT_GROUPED))
                .bind("outbox.role")
                .bind(key)
                .bind("{}")
                .bind("G")
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    }
    .await;
    let drop = format!("DROP OWNED BY {role}; DROP ROLE {role};");
    sqlx::raw_sql(AssertSqlSafe(drop))
        .execute(&app.pool)
        .await
        .expect("drop the role");
    inserted.expect("the application's insert");
    let now = jiff::Timestamp::now();
    let claimed = store
        .claim(backstop_core::store::ClaimParams {
            kind: "outbox.role".into(),
            limit: 10,
            start: 10,
            owner: "test".into(),
            now,
            lease_until: now + SignedDuration::from_secs(30),
            max_attempts: 3,
            on_group_failure: Default::default(),
            per_key: None,
        })
        .await
        .unwrap();
    let mut keys: Vec<&str> = claimed.iter().map(|c| c.key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["g-1", "r-1"],
        "the inserted tasks are claimable, the second of the group parked"
    );
    let parked = store
        .get_by_key(GetByKeyParams {
            kind: "outbox.role".into(),
            key: "g-2".into(),
        })
        .await
        .unwrap()
        .expect("the second task of the group");
    assert!(parked.parked);
    assert_eq!(parked.group.as_deref(), Some("G"));
}

/// docs/outbox.md shows exactly the statements tested here.
#[test]
fn readme_documents_these_statements() {
    let readme = include_str!("../../../docs/outbox.md");
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    for sql in [INSERT, INSERT_GROUPED, INSERT_OPTIONAL] {
        assert!(
            flat(readme).contains(&flat(sql)),
            "docs/outbox.md lacks: {sql}"
        );
    }
}
