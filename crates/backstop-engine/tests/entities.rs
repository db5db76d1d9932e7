//! Guarded state transitions through the engine, on a real SQLite ledger: requests are checked
//! against the configured machines before the ledger decides them.

use backstop_core::validate::InvalidInput;
use backstop_core::{Answer, Clock, Machine, ManualClock, Store};
use backstop_engine::{Engine, EngineError, TransitionError, TransitionRequest};
use backstop_store_sqlite::SqliteStore;
use std::sync::Arc;
use std::time::Duration;

fn order() -> Machine {
    Machine::new(
        "order",
        "pending",
        [
            ("pending", vec!["paid", "closed"]),
            ("paid", vec!["refunding", "refunded"]),
            ("refunding", vec!["refunded"]),
        ],
    )
    .unwrap()
}

async fn engine() -> (Engine, Arc<ManualClock>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&dir.path().join("t.db").display().to_string())
            .await
            .unwrap(),
    );
    let clock = Arc::new(ManualClock::new("2030-01-01T00:00:00Z".parse().unwrap()));
    let engine = Engine::builder(store)
        .clock(clock.clone())
        .machine(order())
        .build()
        .unwrap();
    (engine, clock, dir)
}

fn req(id: &str, to: &str, event_id: &str, version: Option<i64>) -> TransitionRequest {
    TransitionRequest {
        machine: "order".into(),
        id: id.into(),
        to: to.into(),
        event_id: event_id.into(),
        version,
    }
}

#[tokio::test]
async fn transitions_are_guarded_and_recorded_with_the_engine_clock() {
    let (engine, clock, _dir) = engine().await;
    let start = clock.now();
    let paid = engine
        .transition(req("1001", "paid", "pay", Some(1)))
        .await
        .unwrap();
    assert_eq!(paid.answer, Answer::Applied);
    assert_eq!(paid.entity.state, "paid");
    clock.advance(Duration::from_secs(5));
    let refunding = engine
        .transition(req("1001", "refunding", "refund", Some(2)))
        .await
        .unwrap();
    assert_eq!(refunding.answer, Answer::Applied);
    let repeated = engine
        .transition(req("1001", "paid", "pay-again", Some(3)))
        .await
        .unwrap();
    assert_eq!(repeated.answer, Answer::Rejected);
    assert_eq!(repeated.entity.state, "refunding");
    let h = engine.entity("order", "1001").await.unwrap().unwrap();
    assert_eq!(h.entity.state, "refunding");
    assert_eq!(h.entity.version, Some(2));
    assert_eq!(h.entity.created_at, start);
    assert_eq!(h.decisions.len(), 3);
    assert_eq!(h.decisions[2].at, clock.now());
    assert!(engine.entity("order", "1002").await.unwrap().is_none());
}

#[tokio::test]
async fn unknown_machines_states_and_bad_ids_are_refused_before_the_ledger() {
    let (engine, _clock, _dir) = engine().await;
    let mut r = req("1", "paid", "e", None);
    r.machine = "refund".into();
    match engine.transition(r).await {
        Err(TransitionError::UnknownMachine(name, known)) => {
            assert_eq!((name.as_str(), known.as_str()), ("refund", "order"));
        }
        other => panic!("{other:?}"),
    }
    let e = engine
        .transition(req("1", "shipped", "e", None))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, TransitionError::UnknownState { state, .. } if state == "shipped"),
        "{e:?}"
    );
    assert!(e.to_string().contains("closed, paid, pending"), "{e}");
    let e = engine.transition(req("", "paid", "e", None)).await;
    assert!(matches!(
        e,
        Err(TransitionError::Invalid(InvalidInput::Empty {
            field: "id"
        }))
    ));
    let e = engine
        .transition(req("1", "paid", &"e".repeat(256), None))
        .await;
    assert!(matches!(
        e,
        Err(TransitionError::Invalid(InvalidInput::TooLong { .. }))
    ));
    assert!(matches!(
        engine.entity("refund", "1").await,
        Err(TransitionError::UnknownMachine(..))
    ));
    assert!(
        engine.entity("order", "1").await.unwrap().is_none(),
        "nothing refused reached the ledger"
    );
}

#[tokio::test]
async fn a_machine_is_configured_once() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&dir.path().join("t.db").display().to_string())
            .await
            .unwrap(),
    );
    let built = Engine::builder(store)
        .machine(order())
        .machine(order())
        .build();
    assert!(matches!(built, Err(EngineError::DuplicateMachine(m)) if m == "order"));
}
