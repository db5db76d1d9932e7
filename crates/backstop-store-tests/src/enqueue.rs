//! Enqueue: idempotent by `(kind, key)`, durable, concurrent.

use crate::fixtures::*;
use backstop_core::store::*;
use backstop_core::{EventType, Status, TaskId};
use std::collections::HashSet;
use std::sync::Arc;

type S = Arc<dyn Store>;

pub async fn enqueue_creates_a_pending_task(store: S) {
    let mut t = task("sms.send", "order-1", r#"{"to":"+100"}"#);
    t.expires_at = Some(at(3600));
    t.traceparent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
    let id = put(&*store, t.clone()).await;
    assert_eq!(id, t.id, "a new task keeps the id it was given");
    let got = store
        .get(GetParams { id })
        .await
        .unwrap()
        .expect("task exists");
    assert_eq!(got.kind, "sms.send");
    assert_eq!(got.key, "order-1");
    assert_eq!(got.status, Status::Pending);
    assert_eq!(got.attempts, 0);
    assert_eq!(got.max_attempts, 3);
    assert_eq!(got.run_at, t0());
    assert_eq!(got.expires_at, Some(at(3600)));
    assert_eq!(got.traceparent, t.traceparent);
    assert_eq!(got.created_at, t0());
    assert_eq!(got.epoch, 0);
    let by_key = store
        .get_by_key(GetByKeyParams {
            kind: "sms.send".into(),
            key: "order-1".into(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_key.id, id);
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    assert_eq!(tl.len(), 1);
    assert_eq!(tl[0].kind, EventType::Created);
    assert_eq!(tl[0].at, t0());
}

pub async fn enqueue_preserves_payload_bytes(store: S) {
    let raw = "{\"test\": 2432232314,\n  \"z\":[ 1 ,2 ],\"a\":\"é\"}";
    let id = put(&*store, task("k", "bytes", raw)).await;
    let got = store.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!(
        got.payload,
        raw.as_bytes(),
        "payload bytes must round-trip exactly"
    );
}

pub async fn enqueue_same_payload_returns_the_existing_task(store: S) {
    let id = put(&*store, task("k", "same", r#"{"a":1,"b":2}"#)).await;
    for payload in [r#"{"a":1,"b":2}"#, r#"{ "b": 2, "a": 1 }"#] {
        let r = store
            .enqueue(EnqueueParams {
                tasks: vec![task("k", "same", payload)],
                now: at(5),
            })
            .await
            .unwrap();
        assert_eq!(r, vec![EnqueueResult::Existing(id)], "payload {payload}");
    }
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        1
    );
}

pub async fn enqueue_different_payload_conflicts_and_changes_nothing(store: S) {
    let id = put(&*store, task("k", "dup", r#"{"amount":100}"#)).await;
    let r = store
        .enqueue(EnqueueParams {
            tasks: vec![task("k", "dup", r#"{"amount":999}"#)],
            now: at(5),
        })
        .await
        .unwrap();
    assert_eq!(r, vec![EnqueueResult::Conflict(id)]);
    let got = store.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!(got.payload, br#"{"amount":100}"#);
    assert_eq!(
        got.updated_at,
        t0(),
        "the conflicting enqueue wrote nothing"
    );
    // The same key under another kind is a different operation.
    put(&*store, task("other", "dup", r#"{"amount":999}"#)).await;
}

pub async fn batch_enqueue_reports_each_item_in_order(store: S) {
    let existing = put(&*store, task("k", "a", r#"{"n":1}"#)).await;
    let fresh = task("k", "b", r#"{"n":2}"#);
    let twin = task("k", "b", r#"{"n":2}"#);
    let clash = task("k", "b", r#"{"n":3}"#);
    let r = store
        .enqueue(EnqueueParams {
            tasks: vec![
                task("k", "a", r#"{"n":1}"#),
                fresh.clone(),
                twin,
                task("k", "a", r#"{"n":9}"#),
                clash,
            ],
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(
        r,
        vec![
            EnqueueResult::Existing(existing),
            EnqueueResult::Created(fresh.id),
            EnqueueResult::Existing(fresh.id),
            EnqueueResult::Conflict(existing),
            EnqueueResult::Conflict(fresh.id),
        ]
    );
    assert_eq!(
        store
            .counts(CountsParams {
                kind: Some("k".into())
            })
            .await
            .unwrap()
            .pending,
        2
    );

    // A large batch in one call.
    let many: Vec<_> = (0..1500)
        .map(|i| task("bulk", &format!("k{i}"), "{}"))
        .collect();
    let ids: Vec<TaskId> = many.iter().map(|t| t.id).collect();
    let r = store
        .enqueue(EnqueueParams {
            tasks: many,
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(r.iter().map(EnqueueResult::id).collect::<Vec<_>>(), ids);
    assert_eq!(
        store
            .counts(CountsParams {
                kind: Some("bulk".into())
            })
            .await
            .unwrap()
            .pending,
        1500
    );
}

/// A large batch of new keys may be written without looking first; one taken key in it must
/// still be reported as existing or conflicting, and nothing written twice or half.
pub async fn large_batches_with_a_taken_key_report_it(store: S) {
    for round in 0..3 {
        let kind = format!("big{round}");
        let same = put(&*store, task(&kind, "k700", "{}")).await;
        let other = put(&*store, task(&kind, "k1200", r#"{"n":1}"#)).await;
        let many: Vec<_> = (0..1500)
            .map(|i| task(&kind, &format!("k{i}"), "{}"))
            .collect();
        let r = store
            .enqueue(EnqueueParams {
                tasks: many.clone(),
                now: t0(),
            })
            .await
            .unwrap();
        for (i, (t, r)) in many.iter().zip(&r).enumerate() {
            let want = match i {
                700 => EnqueueResult::Existing(same),
                1200 => EnqueueResult::Conflict(other),
                _ => EnqueueResult::Created(t.id),
            };
            assert_eq!(*r, want, "round {round}, task {i}");
        }
        assert_eq!(
            store
                .counts(CountsParams {
                    kind: Some(kind.clone())
                })
                .await
                .unwrap()
                .pending,
            1500,
            "round {round}: each key once"
        );
        // The next all-new batch after a taken key is written too.
        let after: Vec<_> = (0..1500)
            .map(|i| task(&kind, &format!("after{i}"), "{}"))
            .collect();
        let r = store
            .enqueue(EnqueueParams {
                tasks: after.clone(),
                now: t0(),
            })
            .await
            .unwrap();
        assert!(
            r.iter()
                .zip(&after)
                .all(|(r, t)| *r == EnqueueResult::Created(t.id)),
            "round {round}: the batch after"
        );
    }
}

pub async fn concurrent_enqueues_are_all_durable_and_distinct(store: S) {
    let mut handles = Vec::new();
    for i in 0..200 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let t = task("conc", &format!("k{i}"), "{}");
            let r = store
                .enqueue(EnqueueParams {
                    tasks: vec![t],
                    now: t0(),
                })
                .await
                .unwrap();
            r[0].clone()
        }));
    }
    let mut ids = HashSet::new();
    for h in handles {
        match h.await.unwrap() {
            EnqueueResult::Created(id) => assert!(ids.insert(id)),
            other => panic!("expected created, got {other:?}"),
        }
    }
    for id in &ids {
        assert!(
            store.get(GetParams { id: *id }).await.unwrap().is_some(),
            "acknowledged task {id} must exist"
        );
    }
    assert_eq!(
        store
            .counts(CountsParams {
                kind: Some("conc".into())
            })
            .await
            .unwrap()
            .pending,
        200
    );
}

/// Many callers enqueue one key at once (a store may merge concurrent calls into one
/// statement): one task is created, every caller with the same payload is told `Existing`
/// with its id, and every caller with another payload `Conflict`.
pub async fn concurrent_enqueues_of_one_key_create_one_task(store: S) {
    let mut handles = Vec::new();
    for i in 0..40 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let payload = if i % 4 == 3 { "{\"other\":1}" } else { "{}" };
            let r = store
                .enqueue(EnqueueParams {
                    tasks: vec![task("same", "one-key", payload)],
                    now: t0(),
                })
                .await
                .unwrap();
            (payload, r[0].clone())
        }));
    }
    let mut answers = Vec::new();
    for h in handles {
        answers.push(h.await.unwrap());
    }
    let created: Vec<_> = answers
        .iter()
        .filter_map(|(p, r)| match r {
            EnqueueResult::Created(id) => Some((*p, *id)),
            _ => None,
        })
        .collect();
    let [(winner, id)] = created[..] else {
        panic!("exactly one caller creates the task: {answers:?}");
    };
    for (p, r) in &answers {
        match r {
            EnqueueResult::Created(_) => {}
            EnqueueResult::Existing(e) => {
                assert_eq!(
                    (*p, *e),
                    (winner, id),
                    "existing means same payload, same task"
                )
            }
            EnqueueResult::Conflict(c) => {
                assert!(*p != winner && *c == id, "a conflict names the task: {r:?}")
            }
        }
    }
    assert_eq!(
        store
            .counts(CountsParams {
                kind: Some("same".into())
            })
            .await
            .unwrap()
            .pending,
        1
    );
}

/// Concurrent calls made at different moments each keep their own creation time, even when a
/// store writes them together.
pub async fn concurrent_enqueues_keep_each_creation_time(store: S) {
    let mut handles = Vec::new();
    for i in 0..30 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let r = store
                .enqueue(EnqueueParams {
                    tasks: vec![task("when", &format!("w{i}"), "{}")],
                    now: at(i),
                })
                .await
                .unwrap();
            match r[..] {
                [EnqueueResult::Created(id)] => (i, id),
                _ => panic!("expected created, got {r:?}"),
            }
        }));
    }
    for h in handles {
        let (i, id) = h.await.unwrap();
        let t = store
            .get(GetParams { id })
            .await
            .unwrap()
            .expect("the task");
        assert_eq!(t.created_at, at(i), "task w{i}");
    }
}
