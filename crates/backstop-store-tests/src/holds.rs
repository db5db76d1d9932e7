//! Cases of held tasks: leased ahead by a claim but not started. An attempt exists once it
//! starts, so a hold counts no attempt, shows as pending, lapses by itself, and goes back
//! unstarted.

use crate::fixtures::*;
use backstop_core::audit::audit;
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, EventType, Status, TaskId};
use jiff::{SignedDuration, Timestamp};
use std::sync::Arc;

type S = Arc<dyn Store>;

/// Claims up to `limit` tasks of `kind` at `now` for `owner` with a 30 s lease, starting
/// `start` of them.
pub async fn claim_holding(
    store: &dyn Store,
    kind: &str,
    owner: &str,
    limit: usize,
    start: usize,
    now: Timestamp,
) -> Vec<ClaimedTask> {
    store
        .claim(ClaimParams {
            kind: kind.into(),
            limit,
            start,
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

fn lease(c: &ClaimedTask) -> LeaseRef {
    LeaseRef {
        id: c.id,
        epoch: c.epoch,
    }
}

/// Starts held tasks for `owner` at `now` with a 30 s lease, in a write with no completions;
/// returns the leases lost.
pub async fn start(
    store: &dyn Store,
    owner: &str,
    held: &[&ClaimedTask],
    now: Timestamp,
) -> Vec<LeaseRef> {
    let r = store
        .complete(CompleteParams {
            completions: Vec::new(),
            starts: Some(starts(owner, held, now, 30)),
            claims: Vec::new(),
            now,
        })
        .await
        .expect("start");
    assert!(r.stale.is_empty());
    r.not_started
}

/// The start of `held` for `owner` at `now`, each leased for `secs`.
fn starts(owner: &str, held: &[&ClaimedTask], now: Timestamp, secs: i64) -> StartParams {
    StartParams {
        owner: owner.into(),
        tasks: held
            .iter()
            .map(|c| StartTask {
                lease: lease(c),
                run_at: c.run_at,
                lease_until: now + SignedDuration::from_secs(secs),
            })
            .collect(),
        now,
    }
}

async fn attempts_on_timeline(store: &dyn Store, id: TaskId) -> usize {
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    tl.iter().filter(|e| e.kind == EventType::Attempt).count()
}

async fn audits_clean(store: &dyn Store) {
    let page = store
        .audit_page(AuditParams {
            after: None,
            limit: 1000,
        })
        .await
        .unwrap();
    for (t, tl) in &page {
        let drift = audit(t, tl);
        assert!(drift.is_empty(), "{} ({}): {drift:?}", t.key, t.status);
    }
}

pub async fn a_held_task_counts_no_attempt_until_it_starts(store: S) {
    let s = &*store;
    for i in 0..3 {
        let mut t = task("k", &format!("t{i}"), "{}");
        t.run_at = at(i);
        put(s, t).await;
    }
    let got = claim_holding(s, "k", "w1", 3, 1, at(5)).await;
    assert_eq!(got.len(), 3);
    assert_eq!(
        got.iter().map(|c| c.started).collect::<Vec<_>>(),
        [true, false, false],
        "the oldest starts, the rest are held"
    );
    assert_eq!(
        got.iter().map(|c| c.run_at).collect::<Vec<_>>(),
        [at(0), at(1), at(2)],
        "each claimed task comes with the run_at it had"
    );
    assert!(got.iter().all(|c| c.attempt == 1));
    let c = s
        .counts(CountsParams {
            kind: Some("k".into()),
        })
        .await
        .unwrap();
    assert_eq!((c.running, c.pending), (1, 2), "held tasks are not running");
    for h in &got[1..] {
        let t = s.get(GetParams { id: h.id }).await.unwrap().unwrap();
        assert_eq!((t.status, t.attempts), (Status::Pending, 0));
        assert!(t.is_held());
        assert_eq!(t.lease_owner.as_deref(), Some("w1"));
        assert_eq!(t.run_at, at(35), "due again when the hold ends");
        assert_eq!(attempts_on_timeline(s, h.id).await, 0);
    }
    assert_eq!(attempts_on_timeline(s, got[0].id).await, 1);
    audits_clean(s).await;
    // Nobody else claims a held task while the hold lasts.
    assert!(claim_holding(s, "k", "w2", 10, 10, at(6)).await.is_empty());

    let lost = start(s, "w1", &[&got[1]], at(7)).await;
    assert!(lost.is_empty());
    let t = s.get(GetParams { id: got[1].id }).await.unwrap().unwrap();
    assert_eq!((t.status, t.attempts), (Status::Running, 1));
    assert_eq!(t.run_at, at(1), "starting puts back the run_at it had");
    assert_eq!(t.lease_until, Some(at(37)));
    assert_eq!(attempts_on_timeline(s, got[1].id).await, 1);
    // Its completion counts under the claim's epoch.
    let done = completion(&got[1], Status::Succeeded, AttemptOutcome::Succeeded, at(8));
    let r = complete(s, vec![done], at(8)).await;
    assert!(r.stale.is_empty());
    assert_eq!(
        s.get(GetParams { id: got[1].id })
            .await
            .unwrap()
            .unwrap()
            .status,
        Status::Succeeded
    );
    audits_clean(s).await;
}

pub async fn a_lapsed_hold_is_claimed_again_without_rescue_or_attempt(store: S) {
    let s = &*store;
    let id = put(s, task("k", "lapsed", "{}")).await;
    let held = claim_holding(s, "k", "crashed", 1, 0, at(0))
        .await
        .remove(0);
    assert!(!held.started);
    let rescued = s
        .rescue(RescueParams {
            now: at(100),
            limit: 10,
        })
        .await
        .unwrap();
    assert!(rescued.is_empty(), "a hold needs no rescue");
    let again = claim_holding(s, "k", "w2", 1, 1, at(31)).await;
    assert_eq!(again.len(), 1, "due again once the hold ended");
    assert_eq!(again[0].attempt, 1, "the lapsed hold counted no attempt");
    assert!(again[0].epoch > held.epoch);
    let lost = start(s, "crashed", &[&held], at(32)).await;
    assert_eq!(
        lost,
        [lease(&held)],
        "the first holder's start is fenced off"
    );
    let t = s.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!((t.status, t.attempts), (Status::Running, 1));
    assert_eq!(t.lease_owner.as_deref(), Some("w2"));
    audits_clean(s).await;
}

pub async fn a_held_task_is_heartbeated_and_given_back_unstarted(store: S) {
    let s = &*store;
    let id = put(s, task("k", "held", "{}")).await;
    let held = claim_holding(s, "k", "w1", 1, 0, at(0)).await.remove(0);
    let lost = s
        .heartbeat(HeartbeatParams {
            owner: "w1".into(),
            leases: vec![lease(&held)],
            lease_until: at(60),
            now: at(20),
        })
        .await
        .unwrap();
    assert!(lost.is_empty());
    let t = s.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!((t.lease_until, t.run_at), (Some(at(60)), at(60)));
    assert!(
        claim_holding(s, "k", "w2", 1, 1, at(40)).await.is_empty(),
        "the heartbeat kept the hold"
    );
    let n = s
        .release(ReleaseParams {
            leases: vec![lease(&held)],
            worker: "w1".into(),
            now: at(41),
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    let t = s.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!((t.status, t.attempts), (Status::Pending, 0));
    assert_eq!((t.lease_owner, t.lease_until), (None, None));
    assert_eq!(t.run_at, at(41), "due again at once");
    assert_eq!(attempts_on_timeline(s, id).await, 0, "no attempt was made");
    assert_eq!(start(s, "w1", &[&held], at(42)).await, [lease(&held)]);
    audits_clean(s).await;
}

pub async fn a_canceled_held_task_loses_its_hold(store: S) {
    let s = &*store;
    let id = put(s, task("k", "cancel-held", "{}")).await;
    let held = claim_holding(s, "k", "w1", 1, 0, at(0)).await.remove(0);
    let t = s
        .cancel(ManualParams {
            id,
            actor: "alice".into(),
            reason: None,
            max_attempts: None,
            now: at(1),
        })
        .await
        .unwrap();
    assert_eq!(t.status, Status::Compensated);
    assert_eq!((t.lease_owner, t.lease_until), (None, None));
    assert_eq!(start(s, "w1", &[&held], at(2)).await, [lease(&held)]);
    assert_eq!(
        s.get(GetParams { id }).await.unwrap().unwrap().status,
        Status::Compensated
    );
    audits_clean(s).await;
}

pub async fn a_running_attempt_given_back_with_its_budget_spent_fails(store: S) {
    let s = &*store;
    let mut t = task("k", "one-shot", "{}");
    t.max_attempts = 1;
    let id = put(s, t).await;
    let c = claim_holding(s, "k", "w1", 1, 1, at(0)).await.remove(0);
    let n = s
        .release(ReleaseParams {
            leases: vec![lease(&c)],
            worker: "w1".into(),
            now: at(1),
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    let t = s.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!(
        (t.status, t.attempts, t.max_attempts),
        (Status::Failed, 1, 1),
        "an interrupted last attempt does not run past the budget"
    );
    assert!(t.reason.unwrap().contains("interrupted"));
    let tl = s.timeline(TimelineParams { id }).await.unwrap();
    assert!(
        tl.iter()
            .any(|e| e.outcome == Some(AttemptOutcome::Interrupted))
    );
    audits_clean(s).await;
}

/// A worker refills the slots its outcomes freed in the same write: the outcomes and the
/// starts land together, each start under its own lease, a start no longer held is refused
/// beside them, and a stale outcome stops no start.
pub async fn outcomes_and_starts_are_written_together(store: S) {
    let s = &*store;
    for i in 0..4 {
        let mut t = task("k", &format!("t{i}"), "{}");
        t.run_at = at(i);
        put(s, t).await;
    }
    let got = claim_holding(s, "k", "w1", 4, 1, at(5)).await;
    assert_eq!(
        got.iter().map(|c| c.started).collect::<Vec<_>>(),
        [true, false, false, false]
    );
    // The last held task is canceled before its start is written.
    s.cancel(ManualParams {
        id: got[3].id,
        actor: "alice".into(),
        reason: None,
        max_attempts: None,
        now: at(6),
    })
    .await
    .unwrap();
    let mut p = starts("w1", &[&got[1], &got[2], &got[3]], at(7), 30);
    p.tasks[1].lease_until = at(7) + SignedDuration::from_secs(90);
    let done = completion(&got[0], Status::Succeeded, AttemptOutcome::Succeeded, at(7));
    let r = s
        .complete(CompleteParams {
            completions: vec![done],
            starts: Some(p),
            claims: Vec::new(),
            now: at(7),
        })
        .await
        .unwrap();
    assert!(r.stale.is_empty());
    assert_eq!(
        r.not_started,
        [lease(&got[3])],
        "the canceled task is not started"
    );
    assert_eq!(
        s.get(GetParams { id: got[0].id })
            .await
            .unwrap()
            .unwrap()
            .status,
        Status::Succeeded
    );
    for (h, until) in [(&got[1], at(37)), (&got[2], at(97))] {
        let t = s.get(GetParams { id: h.id }).await.unwrap().unwrap();
        assert_eq!((t.status, t.attempts), (Status::Running, 1));
        assert_eq!(t.lease_until, Some(until), "each start has its own lease");
        assert_eq!(t.run_at, h.run_at, "starting puts back the run_at it had");
        assert_eq!(attempts_on_timeline(s, h.id).await, 1);
    }
    let t = s.get(GetParams { id: got[3].id }).await.unwrap().unwrap();
    assert_eq!((t.status, t.attempts), (Status::Compensated, 0));

    // An outcome that lost its lease is refused, and the start beside it still lands.
    let id = put(s, task("k", "late", "{}")).await;
    let held = claim_holding(s, "k", "w1", 1, 0, at(8)).await.remove(0);
    assert_eq!(held.id, id);
    let mut stale = completion(&got[1], Status::Succeeded, AttemptOutcome::Succeeded, at(9));
    stale.lease.epoch += 1;
    let r = s
        .complete(CompleteParams {
            completions: vec![stale.clone()],
            starts: Some(starts("w1", &[&held], at(9), 30)),
            claims: Vec::new(),
            now: at(9),
        })
        .await
        .unwrap();
    assert_eq!(r.stale, [stale.lease]);
    assert!(r.not_started.is_empty());
    let t = s.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!((t.status, t.attempts), (Status::Running, 1));
    audits_clean(s).await;
}
