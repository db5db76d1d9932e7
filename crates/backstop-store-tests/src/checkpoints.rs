//! Checkpoints and suspensions: a cursor saved under a lease reaches the next attempt; a
//! zombie's write is rejected and recorded; a suspended attempt is given back uncounted.

use crate::fixtures::*;
use backstop_core::audit::audit;
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, EventType, Status};
use jiff::Timestamp;
use std::sync::Arc;

type S = Arc<dyn Store>;

fn lease(c: &ClaimedTask) -> LeaseRef {
    LeaseRef {
        id: c.id,
        epoch: c.epoch,
    }
}

/// Saves `cursor` under `c`'s lease at `now`.
async fn save(store: &dyn Store, c: &ClaimedTask, cursor: &str, now: Timestamp) -> Checkpointed {
    store
        .checkpoint(CheckpointParams {
            lease: lease(c),
            attempt: c.attempt,
            worker: "w1".into(),
            cursor: cursor.into(),
            now,
        })
        .await
        .expect("checkpoint")
}

/// Suspends `c`'s attempt at `now`, with a last cursor when given.
async fn suspend(
    store: &dyn Store,
    c: &ClaimedTask,
    cursor: Option<&str>,
    now: Timestamp,
) -> Checkpointed {
    store
        .suspend(SuspendParams {
            lease: lease(c),
            attempt: c.attempt,
            worker: "w1".into(),
            cursor: cursor.map(str::to_string),
            started_at: now,
            now,
        })
        .await
        .expect("suspend")
}

async fn events(store: &dyn Store, c: &ClaimedTask) -> Vec<backstop_core::Event> {
    store
        .timeline(TimelineParams { id: c.id })
        .await
        .expect("timeline")
}

pub async fn a_saved_checkpoint_reaches_the_next_attempt(store: S) {
    put(&*store, task("k", "a", "{}")).await;
    let first = claim(&*store, "k", "w1", 1, at(0)).await.remove(0);
    assert_eq!(first.checkpoint, None, "no cursor before the first save");
    assert_eq!(
        save(&*store, &first, r#"{"offset":1000}"#, at(1)).await,
        Checkpointed::Saved
    );
    assert_eq!(
        save(&*store, &first, r#"{"offset":2000}"#, at(2)).await,
        Checkpointed::Saved
    );
    // The attempt fails transiently; the retry resumes from the last cursor.
    let mut retry = completion(&first, Status::Pending, AttemptOutcome::Retry, at(3));
    retry.run_at = Some(at(4));
    retry.last_error = Some("boom".into());
    assert!(complete(&*store, vec![retry], at(3)).await.stale.is_empty());
    let second = claim(&*store, "k", "w1", 1, at(5)).await.remove(0);
    assert_eq!(second.attempt, 2);
    assert_eq!(second.checkpoint.as_deref(), Some(r#"{"offset":2000}"#));
    // Checkpoints are not attempts and leave nothing on the timeline.
    let types: Vec<EventType> = events(&*store, &second)
        .await
        .iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        types,
        vec![EventType::Created, EventType::Attempt, EventType::Attempt]
    );
}

pub async fn a_zombie_checkpoint_is_rejected_and_recorded(store: S) {
    put(&*store, task("k", "a", "{}")).await;
    let zombie = claim(&*store, "k", "w1", 1, at(0)).await.remove(0);
    assert_eq!(
        save(&*store, &zombie, r#"{"n":1}"#, at(1)).await,
        Checkpointed::Saved
    );
    // Its lease lapses; the task is rescued and claimed again.
    store
        .rescue(RescueParams {
            now: at(100),
            limit: 10,
        })
        .await
        .expect("rescue");
    let live = claim(&*store, "k", "w2", 1, at(101)).await.remove(0);
    assert_eq!(live.checkpoint.as_deref(), Some(r#"{"n":1}"#));
    assert_eq!(
        save(&*store, &live, r#"{"n":5}"#, at(102)).await,
        Checkpointed::Saved
    );
    // The zombie wakes up and tries to write an older cursor over the newer one.
    assert_eq!(
        save(&*store, &zombie, r#"{"n":2}"#, at(103)).await,
        Checkpointed::Rejected
    );
    assert_eq!(
        suspend(&*store, &zombie, Some(r#"{"n":3}"#), at(104)).await,
        Checkpointed::Rejected
    );
    let tl = events(&*store, &live).await;
    let rejected = tl
        .iter()
        .filter(|e| e.kind == EventType::CheckpointRejected)
        .collect::<Vec<_>>();
    assert_eq!(rejected.len(), 1, "one rejected checkpoint on {tl:?}");
    assert_eq!(rejected[0].attempt, Some(zombie.attempt));
    assert!(
        tl.iter().any(|e| e.kind == EventType::StaleCompletion),
        "the zombie's suspension is a stale completion: {tl:?}"
    );
    // The live attempt's cursor stands, and the task is still its.
    let t = store.get(GetParams { id: live.id }).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Running);
    assert_eq!(t.epoch, live.epoch);
    store
        .rescue(RescueParams {
            now: at(1000),
            limit: 10,
        })
        .await
        .expect("rescue");
    let next = claim(&*store, "k", "w3", 1, at(1001)).await.remove(0);
    assert_eq!(next.checkpoint.as_deref(), Some(r#"{"n":5}"#));
}

pub async fn a_suspended_attempt_is_not_counted(store: S) {
    put(&*store, task("k", "a", "{}")).await;
    let first = claim(&*store, "k", "w1", 1, at(0)).await.remove(0);
    assert_eq!(first.attempt, 1);
    assert_eq!(
        save(&*store, &first, r#"[1]"#, at(1)).await,
        Checkpointed::Saved
    );
    assert_eq!(
        suspend(&*store, &first, Some(r#"[2]"#), at(2)).await,
        Checkpointed::Saved
    );
    let t = store
        .get(GetParams { id: first.id })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.status, Status::Pending);
    assert_eq!(t.attempts, 0, "the suspended attempt is given back");
    assert_eq!(t.run_at, at(2), "due again at once");
    assert_eq!(t.lease_owner, None);
    // Suspended again and again, it never runs out of attempts (max_attempts is 3).
    for round in 0..4 {
        let c = claim(&*store, "k", "w1", 1, at(10 + round)).await.remove(0);
        assert_eq!(c.attempt, 1, "round {round}");
        assert_eq!(
            suspend(&*store, &c, None, at(11 + round)).await,
            Checkpointed::Saved
        );
    }
    let last = claim(&*store, "k", "w1", 1, at(20)).await.remove(0);
    assert_eq!(last.attempt, 1);
    assert_eq!(
        last.checkpoint.as_deref(),
        Some("[2]"),
        "a suspension without a cursor keeps the last"
    );
    complete(
        &*store,
        vec![completion(
            &last,
            Status::Succeeded,
            AttemptOutcome::Succeeded,
            at(21),
        )],
        at(21),
    )
    .await;
    let t = store.get(GetParams { id: last.id }).await.unwrap().unwrap();
    let tl = events(&*store, &last).await;
    let suspended = tl.iter().filter(|e| e.kind == EventType::Suspended).count();
    assert_eq!(suspended, 5, "every suspension is on the timeline: {tl:?}");
    assert_eq!(t.attempts, 1);
    assert!(
        audit(&t, &tl).is_empty(),
        "audits clean: {:?}",
        audit(&t, &tl)
    );
}
