//! Cases of retention: old finished tasks of one status go, with their events; failed,
//! pending and running tasks never do.

use crate::fixtures::*;
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, EventType, Status, TaskId};
use jiff::Timestamp;
use std::sync::Arc;

type S = Arc<dyn Store>;

async fn prune(store: &dyn Store, status: Prunable, before: Timestamp, limit: usize) -> u64 {
    store
        .prune(PruneParams {
            status,
            before,
            limit,
        })
        .await
        .expect("prune")
}

/// A task of kind `k` that ends `status` at `done`, after a retried first attempt (so that
/// its timeline has rows beyond the task's own).
async fn finished(store: &dyn Store, key: &str, status: Status, done: Timestamp) -> TaskId {
    let id = put(store, task("k", key, "{}")).await;
    let c = claim(store, "k", "w1", 1, t0()).await;
    assert_eq!(c[0].id, id);
    let mut retry = completion(&c[0], Status::Pending, AttemptOutcome::Retry, t0());
    retry.run_at = Some(t0());
    complete(store, vec![retry], t0()).await;
    let c = claim(store, "k", "w1", 1, t0()).await;
    let outcome = match status {
        Status::Succeeded => AttemptOutcome::Succeeded,
        Status::Compensated => AttemptOutcome::Skipped,
        _ => AttemptOutcome::Failed,
    };
    let mut end = completion(&c[0], status, outcome, done);
    end.reason = (status != Status::Succeeded).then(|| "because".into());
    complete(store, vec![end], done).await;
    assert_eq!(
        store.get(GetParams { id }).await.unwrap().unwrap().status,
        status
    );
    id
}

/// Asserts the task and every event of it are gone: a new task under the same id starts
/// with an empty timeline.
async fn assert_gone(store: &dyn Store, id: TaskId, key: &str) {
    assert!(
        store.get(GetParams { id }).await.unwrap().is_none(),
        "{key} was pruned"
    );
    let mut again = task("k", key, "{}");
    again.id = id;
    put(store, again).await;
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    assert_eq!(
        tl.iter().map(|e| e.kind).collect::<Vec<_>>(),
        vec![EventType::Created],
        "{key}: its old events went with it"
    );
}

pub async fn prune_deletes_only_old_tasks_of_the_status(store: S) {
    let old_ok = finished(&*store, "old-ok", Status::Succeeded, at(10)).await;
    let new_ok = finished(&*store, "new-ok", Status::Succeeded, at(100)).await;
    let old_comp = finished(&*store, "old-comp", Status::Compensated, at(10)).await;
    let old_dead = finished(&*store, "old-dead", Status::Failed, at(10)).await;
    let pending = put(&*store, task("k", "pending", "{}")).await;
    let running = put(&*store, task("other", "running", "{}")).await;
    claim(&*store, "other", "w1", 1, t0()).await;

    assert_eq!(prune(&*store, Prunable::Succeeded, at(50), 100).await, 1);
    for kept in [new_ok, old_comp, old_dead, pending, running] {
        assert!(store.get(GetParams { id: kept }).await.unwrap().is_some());
    }
    assert_eq!(prune(&*store, Prunable::Succeeded, at(50), 100).await, 0);
    assert_eq!(
        prune(&*store, Prunable::Succeeded, at(10), 100).await,
        0,
        "only tasks changed before the cutoff"
    );
    assert_eq!(prune(&*store, Prunable::Compensated, at(50), 100).await, 1);

    // However late the cutoff, failed, pending and running tasks stay.
    let future = at(10_000_000);
    assert_eq!(prune(&*store, Prunable::Succeeded, future, 100).await, 1);
    assert_eq!(prune(&*store, Prunable::Compensated, future, 100).await, 0);
    let c = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(
        (c.pending, c.running, c.succeeded, c.failed, c.compensated),
        (1, 1, 0, 1, 0)
    );
    assert!(
        store
            .timeline(TimelineParams { id: old_dead })
            .await
            .unwrap()
            .len()
            >= 3
    );
    assert_gone(&*store, old_ok, "old-ok").await;
    assert_gone(&*store, old_comp, "old-comp").await;
    assert_gone(&*store, new_ok, "new-ok").await;
}

pub async fn prune_takes_bounded_batches(store: S) {
    for i in 0..5 {
        finished(&*store, &format!("t{i}"), Status::Succeeded, at(10)).await;
    }
    let mut batches = Vec::new();
    loop {
        let n = prune(&*store, Prunable::Succeeded, at(20), 2).await;
        batches.push(n);
        if n == 0 {
            break;
        }
    }
    assert_eq!(batches, vec![2, 2, 1, 0]);
    assert_eq!(prune(&*store, Prunable::Succeeded, at(20), 0).await, 0);
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        0
    );
}
