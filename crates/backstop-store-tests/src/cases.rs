//! The cases. Each takes a fresh store and asserts one behaviour of the ledger.

use crate::fixtures::*;
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, EventType, Status, StoreError, TaskId};
use jiff::SignedDuration;
use std::collections::HashSet;
use std::sync::Arc;

type S = Arc<dyn Store>;

pub use crate::callbacks::*;
pub use crate::entities::*;
pub use crate::holds::*;
pub use crate::leadership::*;
pub use crate::redrive::*;
pub use crate::retention::*;
pub use crate::watch::*;

pub async fn enqueue_creates_a_pending_task(store: S) {
    let mut t = task("sms.send", "order-1", r#"{"to":"+100"}"#);
    t.expires_at = Some(at(3600));
    t.traceparent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
    let id = put(&*store, t.clone()).await;
    assert_eq!(id, t.id, "a new task keeps the id it was given");
    let got = store.get(id).await.unwrap().expect("task exists");
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
        .get_by_key("sms.send", "order-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_key.id, id);
    let tl = store.timeline(id).await.unwrap();
    assert_eq!(tl.len(), 1);
    assert_eq!(tl[0].kind, EventType::Created);
    assert_eq!(tl[0].at, t0());
}

pub async fn enqueue_preserves_payload_bytes(store: S) {
    let raw = "{\"test\": 2432232314,\n  \"z\":[ 1 ,2 ],\"a\":\"é\"}";
    let id = put(&*store, task("k", "bytes", raw)).await;
    let got = store.get(id).await.unwrap().unwrap();
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
    assert_eq!(store.counts(None).await.unwrap().total(), 1);
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
    let got = store.get(id).await.unwrap().unwrap();
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
    assert_eq!(store.counts(Some("k")).await.unwrap().pending, 2);

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
    assert_eq!(store.counts(Some("bulk")).await.unwrap().pending, 1500);
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
            store.get(*id).await.unwrap().is_some(),
            "acknowledged task {id} must exist"
        );
    }
    assert_eq!(store.counts(Some("conc")).await.unwrap().pending, 200);
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
    assert_eq!(store.counts(Some("same")).await.unwrap().pending, 1);
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
        let t = store.get(id).await.unwrap().expect("the task");
        assert_eq!(t.created_at, at(i), "task w{i}");
    }
}

pub async fn claim_leases_only_due_tasks_of_the_kind(store: S) {
    let due = put(&*store, task("k", "due", "{}")).await;
    let mut later = task("k", "later", "{}");
    later.run_at = at(60);
    let later = put(&*store, later).await;
    put(&*store, task("other", "x", "{}")).await;

    let got = claim(&*store, "k", "w1", 10, t0()).await;
    assert_eq!(got.len(), 1);
    let c = &got[0];
    assert_eq!(c.id, due);
    assert_eq!(c.kind, "k");
    assert_eq!(c.key, "due");
    assert_eq!(c.attempt, 1);
    assert_eq!(c.epoch, 1);
    assert_eq!(c.payload, b"{}");
    let t = store.get(due).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Running);
    assert_eq!(t.lease_owner.as_deref(), Some("w1"));
    assert_eq!(t.lease_until, Some(at(30)));
    assert_eq!(t.attempts, 1);

    assert!(
        claim(&*store, "k", "w1", 10, t0()).await.is_empty(),
        "running tasks are not claimed again"
    );
    let got = claim(&*store, "k", "w1", 10, at(60)).await;
    assert_eq!(got.iter().map(|c| c.id).collect::<Vec<_>>(), vec![later]);
}

pub async fn claim_respects_the_limit_and_run_at_order(store: S) {
    let mut ids = Vec::new();
    for i in (0..5).rev() {
        let mut t = task("k", &format!("t{i}"), "{}");
        t.run_at = at(i);
        ids.push((i, put(&*store, t).await));
    }
    ids.sort();
    let got = claim(&*store, "k", "w1", 2, at(100)).await;
    let mut got_ids: Vec<TaskId> = got.iter().map(|c| c.id).collect();
    got_ids.sort();
    let mut want = vec![ids[0].1, ids[1].1];
    want.sort();
    assert_eq!(got_ids, want, "the two with the earliest run_at");
    assert_eq!(claim(&*store, "k", "w1", 0, at(100)).await.len(), 0);
    assert_eq!(claim(&*store, "k", "w1", 100, at(100)).await.len(), 3);
}

pub async fn concurrent_claims_never_share_a_task(store: S) {
    let tasks: Vec<_> = (0..400)
        .map(|i| task("k", &format!("c{i}"), "{}"))
        .collect();
    store
        .enqueue(EnqueueParams { tasks, now: t0() })
        .await
        .unwrap();
    let mut handles = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = claim(&*store, "k", &format!("w{w}"), 7, at(1)).await;
                if got.is_empty() {
                    break mine;
                }
                mine.extend(got.into_iter().map(|c| c.id));
            }
        }));
    }
    let mut seen = HashSet::new();
    for h in handles {
        for id in h.await.unwrap() {
            assert!(seen.insert(id), "task {id} was claimed twice");
        }
    }
    assert_eq!(seen.len(), 400);
}

pub async fn success_completes_and_records_the_attempt(store: S) {
    let id = put(&*store, task("k", "ok", "{}")).await;
    let c = claim(&*store, "k", "w1", 1, at(1)).await.remove(0);
    let mut done = completion(&c, Status::Succeeded, AttemptOutcome::Succeeded, at(1));
    done.http_status = Some(204);
    let r = complete(&*store, vec![done], at(2)).await;
    assert!(r.stale.is_empty());
    let t = store.get(id).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Succeeded);
    assert_eq!(t.lease_owner, None);
    assert_eq!(t.attempts, 1);
    let tl = store.timeline(id).await.unwrap();
    let kinds: Vec<_> = tl.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![EventType::Created, EventType::Attempt]);
    let a = &tl[1];
    assert_eq!(a.attempt, Some(1));
    assert_eq!(a.outcome, Some(AttemptOutcome::Succeeded));
    assert_eq!(a.http_status, Some(204));
    assert_eq!(a.duration_ms, Some(25));
    assert_eq!(a.worker.as_deref(), Some("w1"));
    assert!(
        claim(&*store, "k", "w1", 1, at(100)).await.is_empty(),
        "succeeded is final"
    );
}

pub async fn retry_reschedules_and_keeps_every_attempt(store: S) {
    let id = put(&*store, task("k", "flaky", "{}")).await;
    let c1 = claim(&*store, "k", "w1", 1, at(1)).await.remove(0);
    let mut r1 = completion(&c1, Status::Pending, AttemptOutcome::Retry, at(1));
    r1.run_at = Some(at(10));
    r1.last_error = Some("HTTP 503: transient".into());
    r1.http_status = Some(503);
    complete(&*store, vec![r1], at(2)).await;
    let t = store.get(id).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Pending);
    assert_eq!(t.run_at, at(10));
    assert_eq!(t.last_error.as_deref(), Some("HTTP 503: transient"));
    assert!(
        claim(&*store, "k", "w1", 1, at(9)).await.is_empty(),
        "not before its backoff"
    );

    let c2 = claim(&*store, "k", "w2", 1, at(10)).await.remove(0);
    assert_eq!(c2.attempt, 2);
    assert_eq!(c2.epoch, c1.epoch + 1);
    let mut ok = completion(&c2, Status::Succeeded, AttemptOutcome::Succeeded, at(10));
    ok.worker = "w2".into();
    ok.http_status = Some(200);
    complete(&*store, vec![ok], at(11)).await;
    let tl = store.timeline(id).await.unwrap();
    let attempts: Vec<_> = tl.iter().filter(|e| e.kind == EventType::Attempt).collect();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].attempt, Some(1));
    assert_eq!(attempts[0].outcome, Some(AttemptOutcome::Retry));
    assert_eq!(attempts[0].http_status, Some(503));
    assert_eq!(attempts[0].error.as_deref(), Some("HTTP 503: transient"));
    assert_eq!(attempts[1].attempt, Some(2));
    assert_eq!(attempts[1].outcome, Some(AttemptOutcome::Succeeded));
    assert_eq!(attempts[1].worker.as_deref(), Some("w2"));
    assert_eq!(
        store.get(id).await.unwrap().unwrap().status,
        Status::Succeeded
    );
}

pub async fn failure_and_skip_end_the_task_with_reasons(store: S) {
    let bad = put(&*store, task("k", "bad", "{}")).await;
    let skip = put(&*store, task("k", "skip", "{}")).await;
    let claimed = claim(&*store, "k", "w1", 2, at(1)).await;
    let mut done = Vec::new();
    for c in &claimed {
        if c.id == bad {
            let mut f = completion(c, Status::Failed, AttemptOutcome::Failed, at(1));
            f.last_error = Some("HTTP 400: permanent".into());
            f.reason = Some("permanent error".into());
            f.http_status = Some(400);
            done.push(f);
        } else {
            let mut s = completion(c, Status::Compensated, AttemptOutcome::Skipped, at(1));
            s.reason = Some("order closed".into());
            done.push(s);
        }
    }
    complete(&*store, done, at(2)).await;
    let b = store.get(bad).await.unwrap().unwrap();
    assert_eq!(b.status, Status::Failed);
    assert_eq!(b.last_error.as_deref(), Some("HTTP 400: permanent"));
    let s = store.get(skip).await.unwrap().unwrap();
    assert_eq!(s.status, Status::Compensated);
    assert_eq!(s.reason.as_deref(), Some("order closed"));
    let dead = store
        .list(ListParams {
            status: Some(Status::Failed),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(dead.iter().map(|t| t.id).collect::<Vec<_>>(), vec![bad]);
}

pub async fn stale_completion_is_rejected_and_recorded(store: S) {
    let id = put(&*store, task("k", "fenced", "{}")).await;
    let old = claim(&*store, "k", "slow", 1, at(1)).await.remove(0);
    // The slow worker's lease (30 s) expires; the task is rescued and claimed again.
    let rescued = store
        .rescue(RescueParams {
            now: at(40),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(rescued.len(), 1);
    let new = claim(&*store, "k", "fast", 1, at(41)).await.remove(0);
    assert_eq!(new.id, id);
    assert!(new.epoch > old.epoch);
    // The slow worker finally reports: rejected.
    let r = complete(
        &*store,
        vec![completion(
            &old,
            Status::Succeeded,
            AttemptOutcome::Succeeded,
            at(42),
        )],
        at(42),
    )
    .await;
    assert_eq!(
        r.stale,
        vec![LeaseRef {
            id,
            epoch: old.epoch
        }]
    );
    let t = store.get(id).await.unwrap().unwrap();
    assert_eq!(
        t.status,
        Status::Running,
        "the stale completion changed nothing"
    );
    assert_eq!(t.epoch, new.epoch);
    assert_eq!(t.lease_owner.as_deref(), Some("fast"));
    let tl = store.timeline(id).await.unwrap();
    assert!(
        tl.iter()
            .any(|e| e.kind == EventType::StaleCompletion && e.attempt == Some(old.attempt))
    );
    // The current holder still completes.
    let r = complete(
        &*store,
        vec![completion(
            &new,
            Status::Succeeded,
            AttemptOutcome::Succeeded,
            at(43),
        )],
        at(43),
    )
    .await;
    assert!(r.stale.is_empty());
    assert_eq!(
        store.get(id).await.unwrap().unwrap().status,
        Status::Succeeded
    );
}

pub async fn heartbeat_extends_held_leases_and_reports_lost_ones(store: S) {
    put(&*store, task("k", "a", "{}")).await;
    put(&*store, task("k", "b", "{}")).await;
    let got = claim(&*store, "k", "w1", 2, at(0)).await;
    let refs: Vec<LeaseRef> = got
        .iter()
        .map(|c| LeaseRef {
            id: c.id,
            epoch: c.epoch,
        })
        .collect();
    let lost = store
        .heartbeat(HeartbeatParams {
            owner: "w1".into(),
            leases: refs.clone(),
            lease_until: at(100),
            now: at(20),
        })
        .await
        .unwrap();
    assert!(lost.is_empty());
    assert_eq!(
        store.get(refs[0].id).await.unwrap().unwrap().lease_until,
        Some(at(100))
    );
    assert!(
        store
            .rescue(RescueParams {
                now: at(60),
                limit: 10
            })
            .await
            .unwrap()
            .is_empty(),
        "an extended lease is not rescued"
    );
    // Another owner cannot extend them, and a wrong epoch is a lost lease.
    let lost = store
        .heartbeat(HeartbeatParams {
            owner: "w2".into(),
            leases: refs.clone(),
            lease_until: at(500),
            now: at(21),
        })
        .await
        .unwrap();
    assert_eq!(lost.len(), 2);
    let wrong = vec![LeaseRef {
        id: refs[0].id,
        epoch: refs[0].epoch + 7,
    }];
    let lost = store
        .heartbeat(HeartbeatParams {
            owner: "w1".into(),
            leases: wrong.clone(),
            lease_until: at(500),
            now: at(21),
        })
        .await
        .unwrap();
    assert_eq!(lost, wrong);
}

pub async fn rescue_returns_expired_leases_to_pending_or_failed(store: S) {
    let mut last = task("k", "last", "{}");
    last.max_attempts = 1;
    let last = put(&*store, last).await;
    let more = put(&*store, task("k", "more", "{}")).await;
    claim(&*store, "k", "crashed", 2, at(0)).await;
    assert!(
        store
            .rescue(RescueParams {
                now: at(29),
                limit: 10
            })
            .await
            .unwrap()
            .is_empty()
    );
    let mut rescued = store
        .rescue(RescueParams {
            now: at(31),
            limit: 10,
        })
        .await
        .unwrap();
    rescued.sort_by_key(|r| r.id == more);
    assert_eq!(rescued.len(), 2);
    assert_eq!((rescued[0].id, rescued[0].status), (last, Status::Failed));
    assert_eq!((rescued[1].id, rescued[1].status), (more, Status::Pending));
    assert_eq!(rescued[1].lease_owner.as_deref(), Some("crashed"));
    let m = store.get(more).await.unwrap().unwrap();
    assert_eq!(m.status, Status::Pending);
    assert_eq!(m.lease_owner, None);
    assert!(m.run_at <= at(31));
    let l = store.get(last).await.unwrap().unwrap();
    assert_eq!(l.status, Status::Failed);
    assert!(l.reason.unwrap().contains("attempts exhausted"));
    let tl = store.timeline(more).await.unwrap();
    let a = tl
        .iter()
        .find(|e| e.kind == EventType::Attempt)
        .expect("the lost attempt is recorded");
    assert_eq!(a.outcome, Some(AttemptOutcome::LeaseExpired));
    assert_eq!(a.worker.as_deref(), Some("crashed"));
    assert_eq!(a.duration_ms, Some(31_000));
    // Claimed again, it runs as attempt 2.
    assert_eq!(claim(&*store, "k", "w2", 5, at(32)).await[0].attempt, 2);
}

pub async fn expire_compensates_pending_tasks_past_their_deadline(store: S) {
    let mut soon = task("k", "coupon", "{}");
    soon.expires_at = Some(at(10));
    soon.run_at = at(100);
    let soon = put(&*store, soon).await;
    let mut far = task("k", "far", "{}");
    far.expires_at = Some(at(1000));
    let far = put(&*store, far).await;
    assert_eq!(
        store
            .expire(ExpireParams {
                now: at(9),
                limit: 10
            })
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .expire(ExpireParams {
                now: at(10),
                limit: 10
            })
            .await
            .unwrap(),
        1
    );
    let t = store.get(soon).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Compensated);
    assert_eq!(t.reason.as_deref(), Some("expired"));
    assert!(
        store
            .timeline(soon)
            .await
            .unwrap()
            .iter()
            .any(|e| e.kind == EventType::Expired)
    );
    assert_eq!(
        store.get(far).await.unwrap().unwrap().status,
        Status::Pending
    );
}

pub async fn release_gives_leases_back(store: S) {
    let id = put(&*store, task("k", "rel", "{}")).await;
    let c = claim(&*store, "k", "w1", 1, at(0)).await.remove(0);
    let n = store
        .release(ReleaseParams {
            leases: vec![
                LeaseRef { id, epoch: c.epoch },
                LeaseRef {
                    id,
                    epoch: c.epoch + 5,
                },
            ],
            worker: "w1".into(),
            now: at(3),
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    let t = store.get(id).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Pending);
    assert_eq!(t.run_at, at(3));
    let tl = store.timeline(id).await.unwrap();
    assert!(
        tl.iter()
            .any(|e| e.outcome == Some(AttemptOutcome::Interrupted))
    );
    // A completion for the released lease is now stale.
    let r = complete(
        &*store,
        vec![completion(
            &c,
            Status::Succeeded,
            AttemptOutcome::Succeeded,
            at(4),
        )],
        at(4),
    )
    .await;
    assert_eq!(r.stale.len(), 1);
}

async fn dead_letter(store: &dyn Store, key: &str) -> TaskId {
    let mut t = task("k", key, "{}");
    t.max_attempts = 1;
    let id = put(store, t).await;
    let c = claim(store, "k", "w1", 1, at(0)).await.remove(0);
    let mut f = completion(&c, Status::Failed, AttemptOutcome::Failed, at(0));
    f.last_error = Some("HTTP 400: permanent".into());
    f.http_status = Some(400);
    complete(store, vec![f], at(1)).await;
    id
}

pub async fn manual_retry_renews_the_budget_and_records_the_actor(store: S) {
    let id = dead_letter(&*store, "dl").await;
    let t = store
        .retry(ManualParams {
            id,
            actor: "alice".into(),
            reason: None,
            max_attempts: None,
            now: at(5),
        })
        .await
        .unwrap();
    assert_eq!(t.status, Status::Pending);
    assert_eq!(t.run_at, at(5));
    assert!(t.max_attempts > t.attempts, "the attempt budget is renewed");
    let c = succeed_next(&*store, "k", at(5), at(6), at(6)).await;
    assert_eq!(c.attempt, 2);
    let tl = store.timeline(id).await.unwrap();
    let kinds: Vec<_> = tl.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            EventType::Created,
            EventType::Attempt,
            EventType::Retried,
            EventType::Attempt
        ]
    );
    assert_eq!(tl[1].outcome, Some(AttemptOutcome::Failed));
    assert_eq!(tl[1].http_status, Some(400));
    assert_eq!(tl[2].actor.as_deref(), Some("alice"));
    // Retrying a succeeded task is refused and changes nothing.
    let err = store
        .retry(ManualParams {
            id,
            actor: "alice".into(),
            reason: None,
            max_attempts: None,
            now: at(7),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::WrongStatus {
                status: Status::Succeeded,
                ..
            }
        ),
        "{err}"
    );
    let missing = TaskId::new();
    assert!(matches!(
        store.retry(ManualParams { id: missing, actor: "a".into(), reason: None, max_attempts: None, now: at(7) }).await,
        Err(StoreError::NotFound(m)) if m == missing
    ));
}

pub async fn resolve_and_cancel_follow_the_state_machine(store: S) {
    let id = dead_letter(&*store, "res").await;
    let t = store
        .resolve(ManualParams {
            id,
            actor: "bob".into(),
            reason: Some("refunded by hand".into()),
            max_attempts: None,
            now: at(9),
        })
        .await
        .unwrap();
    assert_eq!(t.status, Status::Compensated);
    assert_eq!(t.reason.as_deref(), Some("refunded by hand"));
    let tl = store.timeline(id).await.unwrap();
    let last = tl.last().unwrap();
    assert_eq!(last.kind, EventType::Resolved);
    assert_eq!(last.actor.as_deref(), Some("bob"));
    assert!(
        tl.iter().any(|e| e.kind == EventType::Attempt),
        "the failed attempt stays on the timeline"
    );
    // Resolving again is refused.
    assert!(matches!(
        store
            .resolve(ManualParams {
                id,
                actor: "bob".into(),
                reason: Some("x".into()),
                max_attempts: None,
                now: at(9)
            })
            .await,
        Err(StoreError::WrongStatus { .. })
    ));
    let p = put(&*store, task("k", "cancel-me", "{}")).await;
    let t = store
        .cancel(ManualParams {
            id: p,
            actor: "carol".into(),
            reason: None,
            max_attempts: None,
            now: at(10),
        })
        .await
        .unwrap();
    assert_eq!(t.status, Status::Compensated);
    assert_eq!(t.reason.as_deref(), Some("canceled"));
    assert!(claim(&*store, "k", "w", 10, at(100)).await.is_empty());
    assert!(matches!(
        store
            .cancel(ManualParams {
                id: p,
                actor: "carol".into(),
                reason: None,
                max_attempts: None,
                now: at(10)
            })
            .await,
        Err(StoreError::WrongStatus { .. })
    ));
}

/// A refused action locks its row before the state machine refuses it; the lock must be gone
/// when the refusal is answered, or a claim made right after it (claims skip locked rows)
/// would pass the task by. Repeated, because a lock left behind is released moments later.
pub async fn a_refused_manual_action_leaves_the_task_claimable(store: S) {
    for i in 0..40 {
        let id = put(&*store, task("k", &format!("refused-{i}"), "{}")).await;
        let refused = store
            .retry(ManualParams {
                id,
                actor: "alice".into(),
                reason: None,
                max_attempts: None,
                now: at(1),
            })
            .await;
        assert!(matches!(refused, Err(StoreError::WrongStatus { .. })));
        let claimed = claim(&*store, "k", "w", 10, at(2)).await;
        assert_eq!(
            claimed.iter().map(|c| c.id).collect::<Vec<_>>(),
            [id],
            "round {i}: the refused task is claimable at once"
        );
    }
}

pub async fn list_filters_and_paginates_newest_first(store: S) {
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(
            put(
                &*store,
                task(
                    if i % 2 == 0 { "even" } else { "odd" },
                    &format!("l{i}"),
                    "{}",
                ),
            )
            .await,
        );
    }
    let all = store
        .list(ListParams {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|t| t.id).collect::<Vec<_>>(),
        ids.iter().rev().copied().collect::<Vec<_>>()
    );
    let page1 = store
        .list(ListParams {
            limit: 3,
            ..Default::default()
        })
        .await
        .unwrap();
    let page2 = store
        .list(ListParams {
            limit: 3,
            before: Some(page1[2].id),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        page2.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![ids[3], ids[2], ids[1]]
    );
    let even = store
        .list(ListParams {
            kind: Some("even".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(even.len(), 4);
    let one = store
        .list(ListParams {
            kind: Some("odd".into()),
            key: Some("l3".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(one.iter().map(|t| t.id).collect::<Vec<_>>(), vec![ids[3]]);
    claim(&*store, "odd", "w", 1, at(0)).await;
    let running = store
        .list(ListParams {
            status: Some(Status::Running),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(running.len(), 1);
}

pub async fn counts_cover_every_task_once(store: S) {
    for i in 0..5 {
        put(&*store, task("k", &format!("n{i}"), "{}")).await;
    }
    put(&*store, task("j", "x", "{}")).await;
    let c = claim(&*store, "k", "w", 2, at(0)).await;
    complete(
        &*store,
        vec![completion(
            &c[0],
            Status::Succeeded,
            AttemptOutcome::Succeeded,
            at(1),
        )],
        at(1),
    )
    .await;
    let k = store.counts(Some("k")).await.unwrap();
    assert_eq!(
        k,
        StatusCounts {
            pending: 3,
            running: 1,
            succeeded: 1,
            failed: 0,
            compensated: 0
        }
    );
    assert_eq!(store.counts(None).await.unwrap().total(), 6);
}

pub async fn migrate_is_idempotent(store: S) {
    let id = put(&*store, task("k", "m", "{}")).await;
    store.migrate().await.unwrap();
    store.migrate().await.unwrap();
    assert!(
        store.get(id).await.unwrap().is_some(),
        "migrating again keeps the data"
    );
    let _ = SignedDuration::ZERO;
}
