//! Claims: due tasks of one kind, in order, never shared.

use crate::fixtures::*;
use backstop_core::store::*;
use backstop_core::{Status, TaskId};
use std::collections::HashSet;
use std::sync::Arc;

type S = Arc<dyn Store>;

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
    let t = store.get(GetParams { id: due }).await.unwrap().unwrap();
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
