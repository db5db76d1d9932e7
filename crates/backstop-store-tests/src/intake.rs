//! Intake and origin: a task taken in as a dead letter (`Intake::Failed`) or compensated at
//! once (`Intake::Compensated`), the origin a source gives a task (shown on its `created`
//! event), and the `redelivered` events that repeats with an origin leave on the timeline.

use crate::fixtures::*;
use backstop_core::audit::audit;
use backstop_core::store::*;
use backstop_core::{CallbackCheck, EventType, Intake, NewTask, Status, TaskId};
use serde_json::Value;
use std::sync::Arc;

type S = Arc<dyn Store>;

/// A broker delivery's metadata as a bridge writes it: nested, non-ASCII, a large number.
const ORIGIN: &str = r#"{"broker":"amqp","queue":"orders.in","message_id":"m-1","delivery_count":1,"x-death":[{"count":2,"reason":"rejected"}],"note":"Grüße 订单","big":12345678901234567}"#;

fn origin(n: u32) -> String {
    format!(r#"{{"broker":"amqp","queue":"orders.in","delivery_count":{n}}}"#)
}

fn dead(kind: &str, key: &str, payload: &str, reason: &str) -> NewTask {
    let mut t = task(kind, key, payload);
    t.intake = Intake::Failed {
        reason: reason.into(),
    };
    t
}

fn compensated(kind: &str, key: &str, payload: &str, reason: &str) -> NewTask {
    let mut t = task(kind, key, payload);
    t.intake = Intake::Compensated {
        reason: reason.into(),
    };
    t
}

async fn enqueue_at(store: &dyn Store, tasks: Vec<NewTask>, secs: i64) -> Vec<EnqueueResult> {
    store
        .enqueue(EnqueueParams {
            tasks,
            now: at(secs),
        })
        .await
        .expect("enqueue")
}

async fn timeline(store: &dyn Store, id: TaskId) -> Vec<backstop_core::Event> {
    store
        .timeline(TimelineParams { id })
        .await
        .expect("timeline")
}

async fn get(store: &dyn Store, id: TaskId) -> backstop_core::Task {
    store
        .get(GetParams { id })
        .await
        .expect("get")
        .expect("the task")
}

fn parsed(s: &str) -> Value {
    serde_json::from_str(s).expect("JSON")
}

pub async fn a_failed_intake_is_a_dead_letter_at_once(store: S) {
    let reason = "backstop.rejected.orders: the message has no key";
    let mut t = dead("backstop.rejected.orders", "m-1", "not json at all", reason);
    t.run_at = at(60);
    t.origin = Some(ORIGIN.into());
    let id = put(&*store, t.clone()).await;
    let got = get(&*store, id).await;
    assert_eq!(got.status, Status::Failed);
    assert_eq!(got.reason.as_deref(), Some(reason));
    assert_eq!(got.last_error.as_deref(), Some(reason));
    assert_eq!((got.attempts, got.epoch), (0, 0));
    assert_eq!((got.lease_owner.as_deref(), got.lease_until), (None, None));
    assert_eq!(got.run_at, at(60), "run_at as given");
    assert_eq!((got.created_at, got.updated_at), (t0(), t0()));
    assert_eq!(got.payload, b"not json at all");
    // Listed among the dead letters (`backstop dead list`) and counted as failed.
    let failed = store
        .list(ListParams {
            status: Some(Status::Failed),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.iter().map(|t| t.id).collect::<Vec<_>>(), [id]);
    assert_eq!(failed[0], got);
    let counts = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!((counts.failed, counts.total()), (1, 1));
    // Never claimed, even long past run_at.
    assert!(
        claim(&*store, "backstop.rejected.orders", "w1", 10, at(3600))
            .await
            .is_empty()
    );
    // The timeline is its creation alone, with the origin; the audit finds it clean.
    let tl = timeline(&*store, id).await;
    assert_eq!(tl.len(), 1, "{tl:?}");
    assert_eq!((tl[0].kind, tl[0].at), (EventType::Created, t0()));
    assert_eq!(tl[0].origin, Some(parsed(ORIGIN)));
    assert_eq!(audit(&got, &tl), []);
    let page = store
        .audit_page(AuditParams {
            after: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].0, got);
    assert_eq!(page[0].1, tl, "the audit reads the same timeline");
    // A repeat is the existing task, whatever its intake; another payload conflicts.
    let again = dead(
        "backstop.rejected.orders",
        "m-1",
        "not json at all",
        "other",
    );
    let plain = task("backstop.rejected.orders", "m-1", "not json at all");
    let other = dead("backstop.rejected.orders", "m-1", "other bytes", reason);
    assert_eq!(
        enqueue_at(&*store, vec![again, plain, other], 5).await,
        [
            EnqueueResult::Existing(id),
            EnqueueResult::Existing(id),
            EnqueueResult::Conflict(id)
        ]
    );
    assert_eq!(get(&*store, id).await, got, "repeats change nothing");
    assert_eq!(timeline(&*store, id).await, tl, "nor its timeline");
}

/// A schedule's missed tick: written compensated with its reason, never run, and clean in
/// the audit (a compensation needs a reason, not an attempt).
pub async fn a_compensated_intake_is_stored_compensated(store: S) {
    let reason = "missed: no planner ran at 2030-01-01T00:00:00Z (catch_up = skip)";
    let mut t = compensated("report.daily", "daily@2030-01-01T00:00:00Z", "{}", reason);
    t.run_at = at(60);
    let id = put(&*store, t).await;
    let got = get(&*store, id).await;
    assert_eq!(got.status, Status::Compensated);
    assert_eq!(got.reason.as_deref(), Some(reason));
    assert_eq!(got.last_error, None, "nothing ran, so nothing failed");
    assert_eq!((got.attempts, got.epoch), (0, 0));
    assert_eq!((got.lease_owner.as_deref(), got.lease_until), (None, None));
    assert_eq!(got.run_at, at(60), "run_at as given");
    assert_eq!((got.created_at, got.updated_at), (t0(), t0()));
    let listed = store
        .list(ListParams {
            status: Some(Status::Compensated),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed, std::slice::from_ref(&got));
    let counts = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!((counts.compensated, counts.total()), (1, 1));
    assert!(
        claim(&*store, "report.daily", "w1", 10, at(3600))
            .await
            .is_empty(),
        "never claimed"
    );
    let tl = timeline(&*store, id).await;
    assert_eq!(tl.len(), 1, "{tl:?}");
    assert_eq!((tl[0].kind, tl[0].at), (EventType::Created, t0()));
    assert_eq!(audit(&got, &tl), []);
    let page = store
        .audit_page(AuditParams {
            after: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(page, [(got.clone(), tl.clone())]);
    // A repeat is the existing task, whatever its intake.
    let again = task("report.daily", "daily@2030-01-01T00:00:00Z", "{}");
    assert_eq!(
        enqueue_at(&*store, vec![again], 5).await,
        [EnqueueResult::Existing(id)]
    );
    assert_eq!(get(&*store, id).await, got, "a repeat changes nothing");
    // Retried by hand like any end: it runs after all.
    let retried = store
        .retry(ManualParams {
            id,
            actor: "alice".into(),
            reason: None,
            max_attempts: None,
            now: at(70),
        })
        .await
        .unwrap();
    assert_eq!((retried.status, retried.reason), (Status::Pending, None));
    assert_eq!(
        claim(&*store, "report.daily", "w1", 10, at(70)).await.len(),
        1
    );
}

/// A verified callback's task is written with its intake too, in the callback's transaction.
pub async fn a_callback_task_is_written_with_its_intake(store: S) {
    for (event, intake, status, last_error) in [
        (
            "e-failed",
            Intake::Failed {
                reason: "bad".into(),
            },
            Status::Failed,
            Some("bad"),
        ),
        (
            "e-compensated",
            Intake::Compensated {
                reason: "late".into(),
            },
            Status::Compensated,
            None,
        ),
    ] {
        let mut p = crate::callbacks::verified("acme", event, "{}", at(1));
        let reason = intake.reason().map(str::to_string);
        match &mut p.check {
            CallbackCheck::Verified(t) => t.intake = intake,
            CallbackCheck::Rejected(_) => unreachable!(),
        }
        let r = store.record_callback(p).await.expect("record_callback");
        let got = get(&*store, r.task_id.expect("a task")).await;
        assert_eq!(
            (got.status, got.reason.clone()),
            (status, reason),
            "{event}"
        );
        assert_eq!(got.last_error.as_deref(), last_error, "{event}");
        assert_eq!(got.attempts, 0, "{event}");
        assert_eq!(audit(&got, &timeline(&*store, got.id).await), [], "{event}");
    }
    let counts = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(
        (counts.failed, counts.compensated, counts.total()),
        (1, 1, 2)
    );
}

pub async fn a_failed_intake_is_retried_like_any_dead_letter(store: S) {
    let mut t = dead("k", "dl", "{}", "taken in from orders.dlq");
    t.max_attempts = 2;
    let id = put(&*store, t).await;
    let retried = store
        .retry(ManualParams {
            id,
            actor: "alice".into(),
            reason: None,
            max_attempts: None,
            now: at(5),
        })
        .await
        .unwrap();
    assert_eq!(retried.status, Status::Pending);
    assert_eq!(retried.run_at, at(5));
    assert_eq!(retried.attempts, 0);
    assert_eq!(retried.max_attempts, 2, "the budget is renewed: 0 used + 2");
    assert_eq!(retried.reason, None);
    let c = succeed_next(&*store, "k", at(5), at(6), at(6)).await;
    assert_eq!((c.id, c.attempt), (id, 1));
    let done = get(&*store, id).await;
    assert_eq!((done.status, done.attempts), (Status::Succeeded, 1));
    let tl = timeline(&*store, id).await;
    let kinds: Vec<_> = tl.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [EventType::Created, EventType::Retried, EventType::Attempt]
    );
    assert_eq!(tl[1].actor.as_deref(), Some("alice"));
    assert_eq!(audit(&done, &tl), []);
}

pub async fn the_origin_is_on_the_created_event(store: S) {
    let mut with = task("k", "with", "{}");
    with.origin = Some(ORIGIN.into());
    let with = put(&*store, with).await;
    let without = put(&*store, task("k", "without", "{}")).await;
    let tl = timeline(&*store, with).await;
    assert_eq!(tl[0].kind, EventType::Created);
    assert_eq!(tl[0].origin, Some(parsed(ORIGIN)), "the exact JSON");
    let tl = timeline(&*store, without).await;
    assert_eq!((tl.len(), tl[0].origin.as_ref()), (1, None));
    // The origin stays on `created` through the task's life.
    let c = succeed_next(&*store, "k", at(1), at(1), at(2)).await;
    assert_eq!(c.id, with);
    let tl = timeline(&*store, with).await;
    assert_eq!(tl.len(), 2);
    assert_eq!(tl[0].origin, Some(parsed(ORIGIN)));
    assert_eq!(tl[1].origin, None, "attempts carry no origin");
}

/// One batch large enough to be cut into several multi-row statements, mixing plain tasks,
/// dead letters and origins: each row gets its own intake and origin.
pub async fn a_batch_mixes_intakes_and_origins(store: S) {
    let tasks: Vec<NewTask> = (0..43u32)
        .map(|i| {
            let mut t = if i % 3 == 0 {
                dead("mix", &format!("m{i}"), "{}", &format!("bad {i}"))
            } else {
                task("mix", &format!("m{i}"), "{}")
            };
            if i % 2 == 0 {
                t.origin = Some(origin(i));
            }
            t
        })
        .collect();
    let results = enqueue_at(&*store, tasks.clone(), 0).await;
    assert_eq!(
        results,
        tasks
            .iter()
            .map(|t| EnqueueResult::Created(t.id))
            .collect::<Vec<_>>()
    );
    for (i, t) in tasks.iter().enumerate() {
        let got = get(&*store, t.id).await;
        let tl = timeline(&*store, t.id).await;
        if i % 3 == 0 {
            assert_eq!(got.status, Status::Failed, "m{i}");
            assert_eq!(got.reason, Some(format!("bad {i}")), "m{i}");
            assert_eq!(got.last_error, got.reason, "m{i}");
        } else {
            assert_eq!(got.status, Status::Pending, "m{i}");
            assert_eq!((got.reason, got.last_error), (None, None), "m{i}");
        }
        let want = (i % 2 == 0).then(|| parsed(&origin(i as u32)));
        assert_eq!(tl[0].origin, want, "m{i}");
        assert_eq!(tl.len(), 1, "m{i}");
    }
    let counts = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!((counts.failed, counts.pending), (15, 28));
    let claimed = claim(&*store, "mix", "w1", 100, at(1)).await;
    assert_eq!(claimed.len(), 28, "only the pending ones are claimed");
}

/// One batch cut into several multi-row statements, mixing the three intakes: each row gets
/// its own status, reason and last error, and only the ones to run are claimed.
pub async fn a_batch_mixes_run_failed_and_compensated_intakes(store: S) {
    let tasks: Vec<NewTask> = (0..43u32)
        .map(|i| {
            let key = format!("m{i}");
            match i % 3 {
                0 => dead("mix", &key, "{}", &format!("bad {i}")),
                1 => compensated("mix", &key, "{}", &format!("skipped {i}")),
                _ => task("mix", &key, "{}"),
            }
        })
        .collect();
    let results = enqueue_at(&*store, tasks.clone(), 0).await;
    assert_eq!(
        results,
        tasks
            .iter()
            .map(|t| EnqueueResult::Created(t.id))
            .collect::<Vec<_>>()
    );
    for (i, t) in tasks.iter().enumerate() {
        let got = get(&*store, t.id).await;
        let want = match i % 3 {
            0 => (
                Status::Failed,
                Some(format!("bad {i}")),
                Some(format!("bad {i}")),
            ),
            1 => (Status::Compensated, Some(format!("skipped {i}")), None),
            _ => (Status::Pending, None, None),
        };
        assert_eq!(
            (got.status, got.reason.clone(), got.last_error.clone()),
            want,
            "m{i}"
        );
        assert_eq!(got.attempts, 0, "m{i}");
        assert_eq!(audit(&got, &timeline(&*store, t.id).await), [], "m{i}");
    }
    let counts = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(
        (counts.failed, counts.compensated, counts.pending),
        (15, 14, 14)
    );
    let claimed = claim(&*store, "mix", "w1", 100, at(1)).await;
    let mut keys: Vec<String> = claimed.into_iter().map(|c| c.key).collect();
    keys.sort();
    let mut want: Vec<String> = (0..43)
        .filter(|i| i % 3 == 2)
        .map(|i| format!("m{i}"))
        .collect();
    want.sort();
    assert_eq!(keys, want, "only the ones to run are claimed");
}

pub async fn a_repeat_with_an_origin_is_a_redelivered_event(store: S) {
    let mut first = task("k", "r", r#"{"a":1}"#);
    first.origin = Some(origin(1));
    let id = put(&*store, first).await;
    let repeat = |n: Option<u32>, payload: &str| {
        let mut t = task("k", "r", payload);
        t.origin = n.map(origin);
        t
    };
    // Two redeliveries, one call each.
    assert_eq!(
        enqueue_at(&*store, vec![repeat(Some(2), r#"{"a":1}"#)], 5).await,
        [EnqueueResult::Existing(id)]
    );
    assert_eq!(
        enqueue_at(&*store, vec![repeat(Some(3), r#"{ "a": 1 }"#)], 6).await,
        [EnqueueResult::Existing(id)]
    );
    // A repeat without an origin (an API caller's retry) and a conflict leave no trace.
    assert_eq!(
        enqueue_at(&*store, vec![repeat(None, r#"{"a":1}"#)], 7).await,
        [EnqueueResult::Existing(id)]
    );
    assert_eq!(
        enqueue_at(&*store, vec![repeat(Some(9), r#"{"a":2}"#)], 8).await,
        [EnqueueResult::Conflict(id)]
    );
    let tl = timeline(&*store, id).await;
    let seen: Vec<_> = tl
        .iter()
        .map(|e| (e.kind, e.at, e.origin.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (EventType::Created, t0(), Some(parsed(&origin(1)))),
            (EventType::Redelivered, at(5), Some(parsed(&origin(2)))),
            (EventType::Redelivered, at(6), Some(parsed(&origin(3)))),
        ]
    );
    // The task itself is as it was: pending, claimable once.
    let t = get(&*store, id).await;
    assert_eq!(
        (t.status, t.attempts, t.updated_at),
        (Status::Pending, 0, t0())
    );
    assert_eq!(audit(&t, &tl), []);
    assert_eq!(claim(&*store, "k", "w1", 10, at(9)).await.len(), 1);
}

/// Repeats inside one batch, and of a dead letter: each repeat with an origin is one event,
/// in the batch's order.
pub async fn redeliveries_in_one_batch_are_each_recorded(store: S) {
    let mut dl = dead("k", "dl", "x", "taken in from orders.dlq");
    dl.origin = Some(origin(1));
    let dl_id = put(&*store, dl).await;
    let mut fresh = task("k", "fresh", "{}");
    fresh.origin = Some(origin(10));
    let fresh_id = fresh.id;
    let mut batch = vec![fresh];
    for (key, n, payload) in [
        ("fresh", Some(11), "{}"),
        ("dl", Some(2), "x"),
        ("fresh", None, "{}"),
        ("dl", Some(3), "x"),
        ("dl", Some(4), "y"),
    ] {
        let mut t = task("k", key, payload);
        t.origin = n.map(origin);
        batch.push(t);
    }
    assert_eq!(
        enqueue_at(&*store, batch, 5).await,
        [
            EnqueueResult::Created(fresh_id),
            EnqueueResult::Existing(fresh_id),
            EnqueueResult::Existing(dl_id),
            EnqueueResult::Existing(fresh_id),
            EnqueueResult::Existing(dl_id),
            EnqueueResult::Conflict(dl_id),
        ]
    );
    let summary = |tl: Vec<backstop_core::Event>| -> Vec<_> {
        tl.into_iter().map(|e| (e.kind, e.at, e.origin)).collect()
    };
    assert_eq!(
        summary(timeline(&*store, fresh_id).await),
        [
            (EventType::Created, at(5), Some(parsed(&origin(10)))),
            (EventType::Redelivered, at(5), Some(parsed(&origin(11)))),
        ]
    );
    assert_eq!(
        summary(timeline(&*store, dl_id).await),
        [
            (EventType::Created, t0(), Some(parsed(&origin(1)))),
            (EventType::Redelivered, at(5), Some(parsed(&origin(2)))),
            (EventType::Redelivered, at(5), Some(parsed(&origin(3)))),
        ]
    );
    let dl = get(&*store, dl_id).await;
    assert_eq!((dl.status, dl.attempts), (Status::Failed, 0));
}
