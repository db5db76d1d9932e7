//! Cases of inbound callbacks: a verified request's record and its task written together, a
//! resend of the same event recognised as a duplicate (also under concurrency), rejections
//! recorded without a task, and listings per source.

use crate::fixtures::*;
use backstop_core::store::*;
use backstop_core::{
    CallbackCheck, CallbackId, CallbackVerdict, ListCallbacksParams, RecordCallbackParams,
    RecordedCallback, Status,
};
use jiff::Timestamp;
use std::sync::Arc;

type S = Arc<dyn Store>;

/// A verified request of `source` carrying event `event` with `payload`, received at `at`.
pub fn verified(source: &str, event: &str, payload: &str, at: Timestamp) -> RecordCallbackParams {
    let mut t = task("payment.notified", event, payload);
    t.run_at = at;
    RecordCallbackParams {
        id: CallbackId::new(),
        source: source.into(),
        received_at: at,
        event_id: Some(event.into()),
        headers: r#"[["webhook-id","evt"],["content-type","application/json"]]"#.into(),
        body: payload.as_bytes().to_vec(),
        body_len: payload.len() as u64,
        check: CallbackCheck::Verified(t),
    }
}

async fn record(store: &dyn Store, p: RecordCallbackParams) -> RecordedCallback {
    store.record_callback(p).await.expect("record_callback")
}

pub async fn callback_accepted_creates_its_task_with_its_record(store: S) {
    let p = verified("stripe", "evt_1", r#"{"id":"evt_1","n":1}"#, at(5));
    let id = p.id;
    let r = record(&*store, p).await;
    assert_eq!(r.id, id);
    assert_eq!(r.verdict, CallbackVerdict::Accepted);
    assert_eq!(r.reason, None);
    let task_id = r.task_id.expect("an accepted callback has a task");
    let task = store
        .get(GetParams { id: task_id })
        .await
        .unwrap()
        .expect("the task exists");
    assert_eq!(
        (task.kind.as_str(), task.key.as_str()),
        ("payment.notified", "evt_1")
    );
    assert_eq!(task.payload, br#"{"id":"evt_1","n":1}"#);
    assert_eq!(task.status, Status::Pending);
    assert_eq!(task.created_at, at(5));
    let listed = store
        .list_callbacks(ListCallbacksParams {
            source: "stripe".into(),
            limit: 10,
            before: None,
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    let c = &listed[0];
    assert_eq!(c.id, id);
    assert_eq!(c.source, "stripe");
    assert_eq!(c.received_at, at(5));
    assert_eq!(c.verdict, CallbackVerdict::Accepted);
    assert_eq!(c.event_id.as_deref(), Some("evt_1"));
    assert_eq!(c.task_id, Some(task_id));
    assert_eq!(
        c.headers,
        r#"[["webhook-id","evt"],["content-type","application/json"]]"#
    );
    assert_eq!(c.body, br#"{"id":"evt_1","n":1}"#);
    assert_eq!(c.body_len, 20);
}

pub async fn callback_resent_is_a_duplicate_and_creates_nothing(store: S) {
    let first = record(&*store, verified("s", "evt_1", r#"{"a":1}"#, at(0))).await;
    let again = record(&*store, verified("s", "evt_1", r#"{"a":1}"#, at(1))).await;
    assert_eq!(again.verdict, CallbackVerdict::Duplicate);
    assert_eq!(again.task_id, first.task_id, "the event's task is named");
    assert_eq!(again.reason, None);
    // Signed by the provider but with other bytes: still the same event, the first stands.
    let changed = record(&*store, verified("s", "evt_1", r#"{"a":2}"#, at(2))).await;
    assert_eq!(changed.verdict, CallbackVerdict::Duplicate);
    assert_eq!(changed.task_id, first.task_id);
    assert!(
        changed
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("different payload"),
        "{changed:?}"
    );
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        1
    );
    let task = store
        .get(GetParams {
            id: first.task_id.unwrap(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(task.payload, br#"{"a":1}"#);
    let listed = store
        .list_callbacks(ListCallbacksParams {
            source: "s".into(),
            limit: 10,
            before: None,
        })
        .await
        .unwrap();
    let verdicts: Vec<_> = listed.iter().map(|c| c.verdict).collect();
    assert_eq!(
        verdicts,
        [
            CallbackVerdict::Duplicate,
            CallbackVerdict::Duplicate,
            CallbackVerdict::Accepted
        ],
        "every request is recorded, newest first"
    );
}

pub async fn callback_rejections_are_recorded_without_a_task(store: S) {
    let p = RecordCallbackParams {
        id: CallbackId::new(),
        source: "wechat".into(),
        received_at: at(3),
        event_id: None,
        headers: "[]".into(),
        body: b"garbage".to_vec(),
        body_len: 70_000,
        check: CallbackCheck::Rejected("no signature matched the request".into()),
    };
    let r = record(&*store, p).await;
    assert_eq!(r.verdict, CallbackVerdict::Rejected);
    assert_eq!(r.task_id, None);
    assert_eq!(
        r.reason.as_deref(),
        Some("no signature matched the request")
    );
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        0
    );
    let listed = store
        .list_callbacks(ListCallbacksParams {
            source: "wechat".into(),
            limit: 10,
            before: None,
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].verdict, CallbackVerdict::Rejected);
    assert_eq!(
        listed[0].reason.as_deref(),
        Some("no signature matched the request")
    );
    assert_eq!(listed[0].body, b"garbage");
    assert_eq!(
        listed[0].body_len, 70_000,
        "the excerpt keeps the real length"
    );
    assert_eq!(listed[0].task_id, None);
    assert_eq!(listed[0].event_id, None);
}

pub async fn concurrent_callbacks_of_one_event_create_one_task(store: S) {
    let mut calls = Vec::new();
    for i in 0..10 {
        let store = store.clone();
        calls.push(tokio::spawn(async move {
            store
                .record_callback(verified("s", "evt_race", r#"{"x":true}"#, at(i)))
                .await
                .expect("record_callback")
        }));
    }
    let mut results = Vec::new();
    for c in calls {
        results.push(c.await.unwrap());
    }
    let accepted = results
        .iter()
        .filter(|r| r.verdict == CallbackVerdict::Accepted)
        .count();
    assert_eq!(accepted, 1, "{results:?}");
    assert!(
        results
            .iter()
            .all(|r| r.verdict != CallbackVerdict::Rejected && r.task_id == results[0].task_id),
        "{results:?}"
    );
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        1
    );
}

pub async fn callbacks_are_listed_per_source_newest_first_with_a_cursor(store: S) {
    let mut ids = Vec::new();
    for i in 0..5 {
        let r = record(&*store, verified("a", &format!("e{i}"), "{}", at(i))).await;
        ids.push(r.id);
        record(&*store, verified("b", &format!("b{i}"), "{}", at(i))).await;
    }
    let page = |before, limit| {
        let store = store.clone();
        async move {
            store
                .list_callbacks(ListCallbacksParams {
                    source: "a".into(),
                    limit,
                    before,
                })
                .await
                .unwrap()
                .into_iter()
                .map(|c| c.id)
                .collect::<Vec<_>>()
        }
    };
    let first = page(None, 2).await;
    assert_eq!(first, [ids[4], ids[3]]);
    let second = page(Some(ids[3]), 2).await;
    assert_eq!(second, [ids[2], ids[1]]);
    let last = page(Some(ids[1]), 2).await;
    assert_eq!(last, [ids[0]]);
    assert!(page(Some(ids[0]), 2).await.is_empty());
    let none = store
        .list_callbacks(ListCallbacksParams {
            source: "nobody".into(),
            limit: 10,
            before: None,
        })
        .await
        .unwrap();
    assert!(none.is_empty());
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        10
    );
}
