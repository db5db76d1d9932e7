//! Completions: outcomes fenced by the lease, every attempt kept.

use crate::fixtures::*;
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, EventType, Status};
use std::sync::Arc;

type S = Arc<dyn Store>;

pub async fn success_completes_and_records_the_attempt(store: S) {
    let id = put(&*store, task("k", "ok", "{}")).await;
    let c = claim(&*store, "k", "w1", 1, at(1)).await.remove(0);
    let mut done = completion(&c, Status::Succeeded, AttemptOutcome::Succeeded, at(1));
    done.http_status = Some(204);
    let r = complete(&*store, vec![done], at(2)).await;
    assert!(r.stale.is_empty());
    let t = store.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Succeeded);
    assert_eq!(t.lease_owner, None);
    assert_eq!(t.attempts, 1);
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
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

pub async fn a_success_note_is_the_attempts_error_and_not_the_tasks(store: S) {
    let id = put(&*store, task("k", "noted", "{}")).await;
    let c = claim(&*store, "k", "w1", 1, at(1)).await.remove(0);
    let mut done = completion(&c, Status::Succeeded, AttemptOutcome::Succeeded, at(1));
    done.note = Some("stored as new past the duplicate window".into());
    complete(&*store, vec![done], at(2)).await;
    let t = store.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Succeeded);
    assert_eq!(t.last_error, None, "a note is no error of the task");
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    let a = tl.iter().find(|e| e.kind == EventType::Attempt).unwrap();
    assert_eq!(a.outcome, Some(AttemptOutcome::Succeeded));
    assert_eq!(
        a.error.as_deref(),
        Some("stored as new past the duplicate window")
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
    let t = store.get(GetParams { id }).await.unwrap().unwrap();
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
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
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
        store.get(GetParams { id }).await.unwrap().unwrap().status,
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
    let b = store.get(GetParams { id: bad }).await.unwrap().unwrap();
    assert_eq!(b.status, Status::Failed);
    assert_eq!(b.last_error.as_deref(), Some("HTTP 400: permanent"));
    let s = store.get(GetParams { id: skip }).await.unwrap().unwrap();
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
    let t = store.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!(
        t.status,
        Status::Running,
        "the stale completion changed nothing"
    );
    assert_eq!(t.epoch, new.epoch);
    assert_eq!(t.lease_owner.as_deref(), Some("fast"));
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
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
        store.get(GetParams { id }).await.unwrap().unwrap().status,
        Status::Succeeded
    );
}
