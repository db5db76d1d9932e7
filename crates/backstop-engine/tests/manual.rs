//! Manual actions through the engine: the rules the API and the CLI share (a retry renews the
//! budget to the kind's current limit; each action is stamped by the engine's clock and names
//! who asked).

use backstop_core::store::{CountsParams, TimelineParams};
use backstop_core::{EventType, KindConfig, ManualClock, Outcome, Status, Store, Target};
use backstop_engine::{Engine, EngineOptions, EnqueueRequest, ManualRequest, handler};
use backstop_store_sqlite::SqliteStore;
use jiff::Timestamp;
use std::sync::Arc;
use std::time::Duration;

fn kind(max_attempts: u32) -> KindConfig {
    let mut k = KindConfig::new("sms", Target::InProcess);
    k.max_attempts = max_attempts;
    k.timeout = Duration::from_secs(5);
    k
}

/// Two tasks dead-lettered by a real run of the engine.
async fn two_dead_letters(store: Arc<dyn Store>) -> [backstop_core::TaskId; 2] {
    two_finished(store, false).await
}

/// Two tasks run to their end by a real run of the engine: succeeded, or dead-lettered.
async fn two_finished(store: Arc<dyn Store>, succeed: bool) -> [backstop_core::TaskId; 2] {
    let engine = Engine::builder(store.clone())
        .kind(kind(1))
        .handler(
            "sms",
            handler(move |_| async move {
                match succeed {
                    true => Outcome::Success,
                    false => Outcome::fail("invalid number"),
                }
            }),
        )
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            ..Default::default()
        })
        .build()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = {
        let e = engine.clone();
        tokio::spawn(async move {
            e.run(async {
                let _ = stopped.await;
            })
            .await
        })
    };
    let mut ids = Vec::new();
    for key in ["a", "b"] {
        let r = EnqueueRequest {
            kind: "sms".into(),
            key: key.into(),
            payload: b"{}".to_vec(),
            ..Default::default()
        };
        ids.push(engine.enqueue(r).await.unwrap().id);
    }
    for _ in 0..250 {
        let c = store
            .counts(CountsParams {
                kind: Some("sms".into()),
            })
            .await
            .unwrap();
        if c.failed + c.succeeded == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(()).unwrap();
    run.await.unwrap();
    [ids[0], ids[1]]
}

/// A new ledger in `dir`.
async fn fresh_store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let path = dir.path().join("t.db").display().to_string();
    Arc::new(SqliteStore::open(&path).await.unwrap())
}

/// An engine on `store` whose kind now allows `max_attempts`, its clock stopped at `at`.
fn engine_at(store: &Arc<dyn Store>, max_attempts: u32, at: Timestamp) -> Engine {
    Engine::builder(store.clone())
        .kind(kind(max_attempts))
        .handler("sms", handler(|_| async { Outcome::Success }))
        .clock(Arc::new(ManualClock::new(at)))
        .build()
        .unwrap()
}

#[tokio::test]
async fn manual_actions_follow_the_engine_and_the_kind() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(&dir).await;
    let [a, b] = two_dead_letters(store.clone()).await;
    // The kind's limit has since been raised, and the engine keeps its own time.
    let at: Timestamp = "2030-01-01T00:00:00Z".parse().unwrap();
    let engine = engine_at(&store, 5, at);

    let t = engine
        .retry(ManualRequest {
            id: a,
            actor: "alice".into(),
            reason: Some("number fixed".into()),
        })
        .await
        .unwrap();
    assert_eq!(t.status, Status::Pending);
    assert_eq!(
        (t.attempts, t.max_attempts - t.attempts),
        (1, 5),
        "the budget renews: the kind's current limit of attempts more"
    );
    assert_eq!(t.run_at, at, "due now, by the engine's clock");
    let retried = store.timeline(TimelineParams { id: a }).await.unwrap();
    let e = retried.last().unwrap();
    assert_eq!((e.kind, e.at), (EventType::Retried, at));
    assert_eq!(e.actor.as_deref(), Some("alice"));

    let t = engine
        .cancel(ManualRequest {
            id: a,
            actor: "bob".into(),
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(t.status, Status::Compensated);
    let e = store
        .timeline(TimelineParams { id: a })
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!((e.kind, e.at), (EventType::Canceled, at));

    let t = engine
        .resolve(ManualRequest {
            id: b,
            actor: "carol".into(),
            reason: Some("refunded by hand".into()),
        })
        .await
        .unwrap();
    assert_eq!(t.status, Status::Compensated);
    assert_eq!(t.reason.as_deref(), Some("refunded by hand"));
    let e = store
        .timeline(TimelineParams { id: b })
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!((e.kind, e.at), (EventType::Resolved, at));
    assert_eq!(e.actor.as_deref(), Some("carol"));
}

#[tokio::test]
async fn a_redrive_renews_the_budget_by_the_engine_s_clock() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(&dir).await;
    let [a, _] = two_finished(store.clone(), true).await;
    let at: Timestamp = "2030-01-01T00:00:00Z".parse().unwrap();
    let engine = engine_at(&store, 4, at);
    let t = engine
        .redrive(ManualRequest {
            id: a,
            actor: "dave".into(),
            reason: Some("the provider has no record of it".into()),
        })
        .await
        .unwrap();
    assert_eq!(t.status, Status::Pending);
    assert_eq!((t.attempts, t.max_attempts - t.attempts), (1, 4));
    assert_eq!(t.run_at, at);
    let e = store
        .timeline(TimelineParams { id: a })
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!((e.kind, e.at), (EventType::Redriven, at));
    assert_eq!(e.actor.as_deref(), Some("dave"));
}
