//! Lease upkeep: heartbeats, rescue of expired leases, expiry, release.

use crate::fixtures::*;
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, EventType, Status};
use std::sync::Arc;

type S = Arc<dyn Store>;

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
        store
            .get(GetParams { id: refs[0].id })
            .await
            .unwrap()
            .unwrap()
            .lease_until,
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
    let m = store.get(GetParams { id: more }).await.unwrap().unwrap();
    assert_eq!(m.status, Status::Pending);
    assert_eq!(m.lease_owner, None);
    assert!(m.run_at <= at(31));
    let l = store.get(GetParams { id: last }).await.unwrap().unwrap();
    assert_eq!(l.status, Status::Failed);
    assert!(l.reason.unwrap().contains("attempts exhausted"));
    let tl = store.timeline(TimelineParams { id: more }).await.unwrap();
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
    let t = store.get(GetParams { id: soon }).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Compensated);
    assert_eq!(t.reason.as_deref(), Some("expired"));
    assert!(
        store
            .timeline(TimelineParams { id: soon })
            .await
            .unwrap()
            .iter()
            .any(|e| e.kind == EventType::Expired)
    );
    assert_eq!(
        store
            .get(GetParams { id: far })
            .await
            .unwrap()
            .unwrap()
            .status,
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
    let t = store.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Pending);
    assert_eq!(t.run_at, at(3));
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
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
