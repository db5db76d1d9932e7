//! Retention on a real SQLite ledger: the leader deletes finished tasks once the policy no
//! longer keeps them, each status on its own clock, and never a dead letter.

use backstop_core::store::{CountsParams, GetParams};
use backstop_core::{KindConfig, ManualClock, Outcome, Status, Store, Target, TaskId};
use backstop_engine::{Engine, EngineOptions, EnqueueRequest, RetentionPolicy, handler};
use backstop_store_sqlite::SqliteStore;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DAY: Duration = Duration::from_secs(86_400);

async fn wait_until<F, Fut>(what: &str, f: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_prunes_finished_tasks_by_policy_and_keeps_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db").display().to_string();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let clock = Arc::new(ManualClock::new("2030-01-01T00:00:00Z".parse().unwrap()));
    let mut builder = Engine::builder(store.clone()).clock(clock.clone());
    for (kind, outcome) in [
        ("ok", Outcome::Success),
        ("skip", Outcome::skip("not wanted")),
        ("bad", Outcome::fail("refused")),
    ] {
        let mut k = KindConfig::new(kind, Target::InProcess);
        k.max_attempts = 1;
        builder = builder.kind(k).handler(
            kind,
            handler(move |_| {
                let outcome = outcome.clone();
                async move { outcome }
            }),
        );
    }
    let engine = builder
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            retention: RetentionPolicy {
                succeeded: Some(30 * DAY),
                compensated: Some(90 * DAY),
            },
            retention_interval: Duration::from_millis(50),
            ..Default::default()
        })
        .build()
        .unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn({
        let e = engine.clone();
        async move {
            e.run(async {
                let _ = rx.await;
            })
            .await
        }
    });
    let mut ids: Vec<(Status, TaskId)> = Vec::new();
    for (kind, status) in [
        ("ok", Status::Succeeded),
        ("skip", Status::Compensated),
        ("bad", Status::Failed),
    ] {
        for i in 0..3 {
            let r = EnqueueRequest {
                kind: kind.into(),
                key: format!("{kind}-{i}"),
                payload: b"{}".to_vec(),
                ..Default::default()
            };
            ids.push((status, engine.enqueue(r).await.unwrap().id));
        }
    }
    wait_until("every task to finish", || async {
        let c = store.counts(CountsParams::default()).await.unwrap();
        (c.succeeded, c.compensated, c.failed) == (3, 3, 3)
    })
    .await;
    assert!(engine.is_leader());

    // A day short of the succeeded policy: nothing goes.
    clock.advance(29 * DAY);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        9
    );

    clock.advance(2 * DAY);
    wait_until("succeeded tasks to be pruned", || async {
        store
            .counts(CountsParams::default())
            .await
            .unwrap()
            .succeeded
            == 0
    })
    .await;
    let c = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!((c.compensated, c.failed), (3, 3), "31 days: only succeeded");

    clock.advance(60 * DAY);
    wait_until("compensated tasks to be pruned", || async {
        store
            .counts(CountsParams::default())
            .await
            .unwrap()
            .compensated
            == 0
    })
    .await;

    clock.advance(3650 * DAY);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!((c.total(), c.failed), (3, 3), "dead letters stay forever");
    for (status, id) in ids {
        let kept = store.get(GetParams { id }).await.unwrap();
        assert_eq!(kept.is_some(), status == Status::Failed, "{status} {id}");
    }
    stop.send(()).unwrap();
    run.await.unwrap();
}
