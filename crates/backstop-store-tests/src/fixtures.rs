//! Small builders shared by the cases.

use backstop_core::store::*;
use backstop_core::{AttemptOutcome, NewTask, Status, TaskId};
use jiff::{SignedDuration, Timestamp};

/// A fixed instant, so cases never depend on the wall clock.
pub fn t0() -> Timestamp {
    "2030-01-01T00:00:00Z".parse().expect("valid timestamp")
}

/// `t0` plus `secs` seconds.
pub fn at(secs: i64) -> Timestamp {
    t0() + SignedDuration::from_secs(secs)
}

/// A new task due at `t0`.
pub fn task(kind: &str, key: &str, payload: &str) -> NewTask {
    NewTask {
        id: TaskId::new(),
        kind: kind.into(),
        key: key.into(),
        payload: payload.as_bytes().to_vec(),
        max_attempts: 3,
        run_at: t0(),
        expires_at: None,
        traceparent: None,
        intake: Default::default(),
        origin: None,
        group: None,
    }
}

/// Enqueues one task at `t0` and returns its id.
pub async fn put(store: &dyn Store, t: NewTask) -> TaskId {
    let r = store
        .enqueue(EnqueueParams {
            tasks: vec![t],
            now: t0(),
        })
        .await
        .expect("enqueue");
    match r[0] {
        EnqueueResult::Created(id) => id,
        ref other => panic!("expected a new task, got {other:?}"),
    }
}

/// Enqueues `tasks` as one batch at `now`; answers each task's result.
pub async fn put_all(store: &dyn Store, tasks: Vec<NewTask>, now: Timestamp) -> Vec<EnqueueResult> {
    store
        .enqueue(EnqueueParams { tasks, now })
        .await
        .expect("enqueue")
}

/// Claims up to `limit` tasks of `kind` at `now` for `owner`, with a 30 s lease.
pub async fn claim(
    store: &dyn Store,
    kind: &str,
    owner: &str,
    limit: usize,
    now: Timestamp,
) -> Vec<ClaimedTask> {
    store
        .claim(ClaimParams {
            kind: kind.into(),
            limit,
            start: limit,
            owner: owner.into(),
            now,
            lease_until: now + SignedDuration::from_secs(30),
            max_attempts: 3,
            on_group_failure: Default::default(),
            per_key: None,
        })
        .await
        .expect("claim")
}

/// A completion of a claimed task.
pub fn completion(
    c: &ClaimedTask,
    status: Status,
    outcome: AttemptOutcome,
    now: Timestamp,
) -> Completion {
    Completion {
        lease: LeaseRef {
            id: c.id,
            epoch: c.epoch,
        },
        attempt: c.attempt,
        status,
        run_at: None,
        last_error: None,
        reason: None,
        outcome,
        http_status: None,
        note: None,
        started_at: now,
        ended_at: now + SignedDuration::from_millis(25),
        worker: "w1".into(),
    }
}

/// Writes completions at `now`.
pub async fn complete(
    store: &dyn Store,
    completions: Vec<Completion>,
    now: Timestamp,
) -> CompleteResult {
    store
        .complete(CompleteParams {
            completions,
            starts: None,
            claims: Vec::new(),
            now,
        })
        .await
        .expect("complete")
}

/// Claims the next task of `kind` for `w1` at `claimed_at` and writes its success: an attempt
/// started at `started_at`, written at `written_at`. Returns the claimed task.
pub async fn succeed_next(
    store: &dyn Store,
    kind: &str,
    claimed_at: Timestamp,
    started_at: Timestamp,
    written_at: Timestamp,
) -> ClaimedTask {
    let c = claim(store, kind, "w1", 1, claimed_at).await.remove(0);
    let done = completion(&c, Status::Succeeded, AttemptOutcome::Succeeded, started_at);
    complete(store, vec![done], written_at).await;
    c
}
