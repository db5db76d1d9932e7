//! Behaviours of the PostgreSQL store beyond the conformance suite: racing batches, repeated
//! completions in one batch, bytes and times that must round-trip exactly.

mod common;

use backstop_core::store::*;
use backstop_core::{AttemptOutcome, EventType, Status, Store};
use backstop_store_tests::{at, claim, complete, completion, put, t0, task};
use common::{SchemaGuard, skip};
use jiff::SignedDuration;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batches_racing_over_the_same_keys_in_opposite_orders_all_answer() {
    if skip() {
        return;
    }
    let guard = SchemaGuard::new();
    let store = Arc::new(guard.store().await);
    // Each round likely deadlocks once on the unique index (PostgreSQL notices after its
    // deadlock_timeout, 1 s by default); the aborted batch runs again.
    for round in 0..3 {
        let forward: Vec<_> = (0..300)
            .map(|i| task("race", &format!("r{round}-{i}"), "{}"))
            .collect();
        let mut backward = forward.clone();
        backward.reverse();
        for t in &mut backward {
            t.id = backstop_core::TaskId::new();
        }
        let (a, b) = tokio::join!(
            store.enqueue(EnqueueParams {
                tasks: forward.clone(),
                now: t0()
            }),
            store.enqueue(EnqueueParams {
                tasks: backward.clone(),
                now: t0()
            }),
        );
        let (a, mut b) = (a.expect("forward batch"), b.expect("backward batch"));
        b.reverse();
        for (x, y) in a.iter().zip(&b) {
            // Each key was created by exactly one batch; the other got the same task back.
            match (x, y) {
                (EnqueueResult::Created(i), EnqueueResult::Existing(j))
                | (EnqueueResult::Existing(j), EnqueueResult::Created(i)) => assert_eq!(i, j),
                other => panic!("round {round}: {other:?}"),
            }
        }
    }
    assert_eq!(
        store
            .counts(CountsParams {
                kind: Some("race".into())
            })
            .await
            .unwrap()
            .pending,
        900
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_lease_twice_in_one_batch_counts_once() {
    if skip() {
        return;
    }
    let guard = SchemaGuard::new();
    let store = guard.store().await;
    let id = put(&store, task("k", "twice", "{}")).await;
    let c = claim(&store, "k", "w1", 1, at(1)).await.remove(0);
    let ok = completion(&c, Status::Succeeded, AttemptOutcome::Succeeded, at(1));
    let mut late = completion(&c, Status::Failed, AttemptOutcome::Failed, at(1));
    late.last_error = Some("should not count".into());
    let r = complete(&store, vec![ok, late], at(2)).await;
    assert_eq!(r.stale, vec![c.lease_ref()]);
    let t = store.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Succeeded);
    assert_eq!(t.last_error, None);
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    let kinds: Vec<_> = tl.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            EventType::Created,
            EventType::Attempt,
            EventType::StaleCompletion
        ]
    );
}

trait LeaseOf {
    fn lease_ref(&self) -> LeaseRef;
}

impl LeaseOf for ClaimedTask {
    fn lease_ref(&self) -> LeaseRef {
        LeaseRef {
            id: self.id,
            epoch: self.epoch,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_and_times_round_trip_exactly() {
    if skip() {
        return;
    }
    let guard = SchemaGuard::new();
    let store = guard.store().await;
    let mut t = task("k", "bytes", "");
    t.payload = vec![0, 0xff, 0xfe, b'\\', b'x', 0, 7];
    // Microseconds are what PostgreSQL keeps.
    t.run_at = t0() + SignedDuration::from_micros(123_456);
    t.expires_at = Some(t0() + SignedDuration::from_micros(-1));
    let id = put(&store, t.clone()).await;
    let got = store.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!(got.payload, t.payload);
    assert_eq!(got.run_at, t.run_at);
    assert_eq!(got.expires_at, t.expires_at);
    // Not JSON, one byte different: a conflict, not the same task.
    let mut other = task("k", "bytes", "");
    other.payload = vec![0, 0xff, 0xfe, b'\\', b'x', 0, 8];
    let r = store
        .enqueue(EnqueueParams {
            tasks: vec![other],
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(r, vec![EnqueueResult::Conflict(id)]);
    let empty = put(&store, task("k", "empty", "")).await;
    assert!(
        store
            .get(GetParams { id: empty })
            .await
            .unwrap()
            .unwrap()
            .payload
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_schema_is_refused() {
    if skip() {
        return;
    }
    use sqlx::{AssertSqlSafe, Connection, PgConnection};
    let guard = SchemaGuard::new();
    let store = guard.store().await;
    let mut conn = PgConnection::connect(&guard.options().url).await.unwrap();
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO \"{}\".schema_migrations (version, name) VALUES (999, 'future')",
        guard.schema
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    let err = store.migrate().await.unwrap_err();
    assert!(
        matches!(
            err,
            backstop_core::StoreError::SchemaTooNew { found: 999, .. }
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_drift_is_found() {
    if skip() {
        return;
    }
    let guard = SchemaGuard::new();
    let store: Arc<dyn Store> = Arc::new(guard.store().await);
    let (url, schema) = (guard.options().url, guard.schema.clone());
    backstop_store_tests::cases::an_injected_drift_is_found(store, move |id| {
        Box::pin(async move {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            let sql = format!(
                "UPDATE \"{schema}\".tasks SET attempts = attempts + 1 WHERE id = $1::uuid"
            );
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(id.0.to_string())
                .execute(&pool)
                .await
                .unwrap();
        })
    })
    .await;
}
