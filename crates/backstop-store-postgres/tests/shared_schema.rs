//! Several processes on one ledger: stores with pools of their own on the same schema, as
//! several backstop processes would be.

mod common;

use backstop_core::store::*;
use backstop_core::{AttemptOutcome, Status, Store, TaskId};
use backstop_store_postgres::PostgresStore;
use backstop_store_tests::{at, complete, completion, t0, task};
use common::{SchemaGuard, skip};
use std::collections::HashSet;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_transitions_from_several_stores_apply_each_event_once() {
    if skip() {
        return;
    }
    let guard = SchemaGuard::new();
    let mut stores: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..5 {
        stores.push(Arc::new(guard.store().await));
    }
    backstop_store_tests::cases::racing_stores_apply_each_event_once(stores, 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_claiming_at_once_never_share_a_task() {
    if skip() {
        return;
    }
    let guard = SchemaGuard::new();
    let a = Arc::new(guard.store().await);
    let b = Arc::new(guard.store().await);
    let tasks: Vec<_> = (0..600)
        .map(|i| task("k", &format!("t{i}"), "{}"))
        .collect();
    a.enqueue(EnqueueParams { tasks, now: t0() }).await.unwrap();
    let mut handles = Vec::new();
    for (s, store) in [a.clone(), b.clone()].into_iter().enumerate() {
        for w in 0..3 {
            let store: Arc<PostgresStore> = store.clone();
            handles.push(tokio::spawn(async move {
                let owner = format!("s{s}w{w}");
                let mut mine = Vec::new();
                loop {
                    let got = backstop_store_tests::claim(&*store, "k", &owner, 9, at(1)).await;
                    if got.is_empty() {
                        break mine;
                    }
                    // Complete half of them at once, beside the other claimers.
                    let done: Vec<_> = got
                        .iter()
                        .step_by(2)
                        .map(|c| completion(c, Status::Succeeded, AttemptOutcome::Succeeded, at(1)))
                        .collect();
                    let r = complete(&*store, done, at(2)).await;
                    assert!(r.stale.is_empty(), "{owner}: {:?}", r.stale);
                    mine.extend(got.into_iter().map(|c| (c.id, c.epoch, owner.clone())));
                }
            }));
        }
    }
    let mut seen: HashSet<TaskId> = HashSet::new();
    for h in handles {
        for (id, epoch, owner) in h.await.unwrap() {
            assert!(seen.insert(id), "task {id} was claimed twice");
            assert_eq!(epoch, 1, "task {id} claimed once, by {owner}");
        }
    }
    assert_eq!(seen.len(), 600);
    let counts = b
        .counts(CountsParams {
            kind: Some("k".into()),
        })
        .await
        .unwrap();
    assert_eq!(counts.pending, 0);
    assert_eq!(counts.running + counts.succeeded, 600);
    for id in seen.iter().take(20) {
        let t = a.get(GetParams { id: *id }).await.unwrap().unwrap();
        assert_eq!(t.attempts, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stores_migrating_at_once_apply_each_migration_once() {
    if skip() {
        return;
    }
    let guard = SchemaGuard::new();
    let mut stores = Vec::new();
    for _ in 0..6 {
        stores.push(PostgresStore::connect(guard.options()).await.unwrap());
    }
    let mut handles = Vec::new();
    for s in stores.clone() {
        handles.push(tokio::spawn(async move { s.migrate().await }));
    }
    for h in handles {
        h.await.unwrap().expect("a concurrent migrate succeeds");
    }
    let versions: Vec<i64> = {
        use sqlx::{AssertSqlSafe, Connection, PgConnection};
        let mut conn = PgConnection::connect(&guard.options().url).await.unwrap();
        sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT version FROM \"{}\".schema_migrations ORDER BY version",
            guard.schema
        )))
        .fetch_all(&mut conn)
        .await
        .unwrap()
    };
    assert_eq!(
        versions,
        (1..=PostgresStore::known_schema_version()).collect::<Vec<_>>()
    );
    backstop_store_tests::put(&stores[0], task("k", "after", "{}")).await;
    assert_eq!(
        stores[5]
            .counts(CountsParams::default())
            .await
            .unwrap()
            .total(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_hold_separate_ledgers() {
    if skip() {
        return;
    }
    let (one, two) = (SchemaGuard::new(), SchemaGuard::new());
    let (a, b) = (one.store().await, two.store().await);
    assert_eq!(a.schema(), one.schema);
    let id = backstop_store_tests::put(&a, task("k", "same", "{}")).await;
    let other = backstop_store_tests::put(&b, task("k", "same", r#"{"other":1}"#)).await;
    assert_ne!(id, other);
    assert!(b.get(GetParams { id }).await.unwrap().is_none());
    assert_eq!(a.counts(CountsParams::default()).await.unwrap().total(), 1);
}
