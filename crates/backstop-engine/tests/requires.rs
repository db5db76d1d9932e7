//! Skip what the business no longer wants: a kind's `requires` reads its guarded entity before
//! every attempt. An order closed while its coupon task waits in backoff gets the task
//! compensated ("order 1001 is closed") with no second delivery; an order never seen is in its
//! machine's initial state; a payload that names no order is a dead letter for a person.

use backstop_core::requires::Requires;
use backstop_core::store::GetByKeyParams;
use backstop_core::{KindConfig, Machine, Outcome, RetryPolicy, Status, Store, Target, Task};
use backstop_engine::{
    Engine, EngineError, EngineOptions, EnqueueRequest, TransitionRequest, handler,
};
use backstop_store_sqlite::SqliteStore;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn order() -> Machine {
    Machine::new(
        "order",
        "pending",
        [
            ("pending", vec!["paid", "closed"]),
            ("paid", vec!["shipped", "closed"]),
        ],
    )
    .unwrap()
}

fn coupon() -> KindConfig {
    let mut k = KindConfig::new("coupon.send", Target::InProcess);
    k.max_attempts = 5;
    k.retry = RetryPolicy::Exponential {
        base: Duration::from_millis(400),
        cap: Duration::from_millis(400),
        jitter: 0.0,
    };
    k.requires = Some(Requires {
        machine: "order".into(),
        id: "/order_id".into(),
        states: vec!["paid".into(), "shipped".into()],
    });
    k
}

async fn by_key(store: &Arc<dyn Store>, key: &str) -> Task {
    store
        .get_by_key(GetByKeyParams {
            kind: "coupon.send".into(),
            key: key.into(),
        })
        .await
        .unwrap()
        .unwrap()
}

async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn move_order(engine: &Engine, id: &str, to: &str, event: &str) {
    engine
        .transition(TransitionRequest {
            machine: "order".into(),
            id: id.into(),
            to: to.into(),
            event_id: event.into(),
            version: None,
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_closed_during_backoff_compensates_its_coupon_without_another_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&dir.path().join("t.db").display().to_string())
            .await
            .unwrap(),
    );
    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    let h = handler(move |_ctx| {
        let c = c.clone();
        async move {
            c.fetch_add(1, Ordering::SeqCst);
            Outcome::retry("coupon service: HTTP 503")
        }
    });
    let engine = Engine::builder(store.clone())
        .machine(order())
        .kind(coupon())
        .handler("coupon.send", h)
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            ..Default::default()
        })
        .build()
        .unwrap();
    let e = engine.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    move_order(&engine, "1001", "paid", "evt-1").await;
    let req = |key: &str, payload: &str| EnqueueRequest {
        kind: "coupon.send".into(),
        key: key.into(),
        payload: payload.as_bytes().to_vec(),
        ..Default::default()
    };
    engine
        .enqueue_many(vec![
            req("c-1001", r#"{"order_id": 1001}"#),
            req("c-7", r#"{"order_id": "7"}"#),
            req("c-none", r#"{"coupon": "X"}"#),
        ])
        .await
        .unwrap();
    // The paid order's coupon is attempted once and waits in backoff (400 ms).
    wait_until("the first attempt", async || {
        by_key(&store, "c-1001").await.attempts == 1
    })
    .await;
    move_order(&engine, "1001", "closed", "evt-2").await;
    wait_until("the coupon compensated", async || {
        by_key(&store, "c-1001").await.status == Status::Compensated
    })
    .await;
    let t = by_key(&store, "c-1001").await;
    assert_eq!(t.reason.as_deref(), Some("order 1001 is closed"));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "no delivery after the order closed"
    );

    // Never seen: the machine's initial state, which is not one of the kind's.
    let t = by_key(&store, "c-7").await;
    assert_eq!(
        (t.status, t.reason.as_deref()),
        (Status::Compensated, Some("order 7 is pending"))
    );
    // Names no order: a dead letter saying why.
    wait_until("the dead letter", async || {
        by_key(&store, "c-none").await.status == Status::Failed
    })
    .await;
    let t = by_key(&store, "c-none").await;
    assert!(
        t.last_error
            .as_deref()
            .is_some_and(|e| e.contains("the payload's /order_id is missing")),
        "{t:?}"
    );
    stop.send(()).unwrap();
    run.await.unwrap();
}

#[tokio::test]
async fn a_guard_on_an_unknown_machine_or_state_is_refused_at_build() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&dir.path().join("t.db").display().to_string())
            .await
            .unwrap(),
    );
    let h = handler(|_ctx| async { Outcome::Success });
    let no_machine = Engine::builder(store.clone())
        .kind(coupon())
        .handler("coupon.send", h.clone())
        .build();
    assert!(matches!(no_machine, Err(EngineError::Requires { .. })));
    let mut k = coupon();
    k.requires.as_mut().unwrap().states = vec!["payed".into()];
    let bad_state = Engine::builder(store)
        .machine(order())
        .kind(k)
        .handler("coupon.send", h)
        .build();
    let e = bad_state.err().expect("refused").to_string();
    assert!(
        e.contains("\"payed\" is not a state of machine \"order\""),
        "{e}"
    );
}
