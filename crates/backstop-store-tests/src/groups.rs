//! Ordering per group: one task of a group at a time, in the order its enqueues committed;
//! tasks behind an open one parked, and unparked by every end of the task before them.

use crate::fixtures::*;
use backstop_core::group::OnFailure;
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, NewTask, Status, Task, TaskId};
use jiff::{SignedDuration, Timestamp};
use std::sync::Arc;

type S = Arc<dyn Store>;

/// A task of kind `k` in `group`, due at `t0`.
pub fn grouped(key: &str, group: &str) -> NewTask {
    let mut t = task("k", key, "{}");
    t.group = Some(group.into());
    t
}

async fn get(store: &dyn Store, id: TaskId) -> Task {
    store
        .get(GetParams { id })
        .await
        .unwrap()
        .expect("the task exists")
}

/// Claims every due task of `k` at `now` (starting them all), with the kind's choice for
/// failures in groups.
async fn claim_all(store: &dyn Store, now: Timestamp, on_failure: OnFailure) -> Vec<ClaimedTask> {
    store
        .claim(ClaimParams {
            kind: "k".into(),
            limit: 100,
            start: 100,
            owner: "w1".into(),
            now,
            lease_until: now + SignedDuration::from_secs(30),
            max_attempts: 3,
            on_group_failure: on_failure,
            per_key: None,
        })
        .await
        .unwrap()
}

fn keys(claimed: &[ClaimedTask]) -> Vec<&str> {
    let mut k: Vec<&str> = claimed.iter().map(|c| c.key.as_str()).collect();
    k.sort_unstable();
    k
}

async fn end(store: &dyn Store, c: &ClaimedTask, status: Status, outcome: AttemptOutcome) {
    let mut done = completion(c, status, outcome, at(1));
    if status == Status::Pending {
        done.run_at = Some(at(60));
        done.last_error = Some("HTTP 503".into());
    }
    if status == Status::Failed {
        done.last_error = Some("HTTP 400: no such order".into());
    }
    if status == Status::Compensated {
        done.reason = Some("skipped by the target".into());
    }
    let r = complete(store, vec![done], at(1)).await;
    assert!(r.stale.is_empty(), "the completion is applied");
}

fn manual(id: TaskId, now: Timestamp) -> ManualParams {
    ManualParams {
        id,
        actor: "alice".into(),
        reason: Some("checked by hand".into()),
        max_attempts: None,
        now,
    }
}

pub async fn a_group_runs_one_task_at_a_time_in_commit_order(store: S) {
    let a1 = put(&*store, grouped("a1", "A")).await;
    let a2 = put(&*store, grouped("a2", "A")).await;
    let a3 = put(&*store, grouped("a3", "A")).await;
    put(&*store, grouped("b1", "B")).await;
    put(&*store, task("k", "u1", "{}")).await;

    let (t1, t2, t3) = (
        get(&*store, a1).await,
        get(&*store, a2).await,
        get(&*store, a3).await,
    );
    assert_eq!(t1.group.as_deref(), Some("A"));
    assert!(t1.group_seq < t2.group_seq && t2.group_seq < t3.group_seq);
    assert!(!t1.parked, "the first task of a group is not parked");
    assert!(t2.parked && t3.parked, "tasks behind it are parked");
    assert_eq!((t2.status, t2.run_at), (Status::Pending, t0()));

    let first = claim_all(&*store, at(0), OnFailure::Block).await;
    assert_eq!(keys(&first), ["a1", "b1", "u1"]);
    assert_eq!(
        first
            .iter()
            .find(|c| c.key == "a1")
            .unwrap()
            .group
            .as_deref(),
        Some("A")
    );
    assert!(claim_all(&*store, at(0), OnFailure::Block).await.is_empty());

    let c1 = first.iter().find(|c| c.key == "a1").unwrap();
    end(&*store, c1, Status::Succeeded, AttemptOutcome::Succeeded).await;
    assert!(!get(&*store, a2).await.parked, "the next task is unparked");
    assert!(get(&*store, a3).await.parked, "only the next one");
    let second = claim_all(&*store, at(2), OnFailure::Block).await;
    assert_eq!(keys(&second), ["a2"]);
    end(
        &*store,
        &second[0],
        Status::Succeeded,
        AttemptOutcome::Succeeded,
    )
    .await;
    assert_eq!(
        keys(&claim_all(&*store, at(3), OnFailure::Block).await),
        ["a3"]
    );
}

pub async fn a_parked_task_keeps_its_own_run_at(store: S) {
    put(&*store, grouped("a1", "A")).await;
    let mut later = grouped("a2", "A");
    later.run_at = at(100);
    let a2 = put(&*store, later).await;
    assert_eq!(get(&*store, a2).await.run_at, at(100));
    let c = claim_all(&*store, at(0), OnFailure::Block).await;
    end(&*store, &c[0], Status::Succeeded, AttemptOutcome::Succeeded).await;
    let t = get(&*store, a2).await;
    assert!(!t.parked);
    assert_eq!(t.run_at, at(100));
    assert!(
        claim_all(&*store, at(50), OnFailure::Block)
            .await
            .is_empty()
    );
    assert_eq!(
        keys(&claim_all(&*store, at(100), OnFailure::Block).await),
        ["a2"]
    );
}

pub async fn a_retry_keeps_its_group_waiting(store: S) {
    put(&*store, grouped("a1", "A")).await;
    let a2 = put(&*store, grouped("a2", "A")).await;
    let c = claim_all(&*store, at(0), OnFailure::Block).await;
    end(&*store, &c[0], Status::Pending, AttemptOutcome::Retry).await;
    assert!(
        get(&*store, a2).await.parked,
        "a task waiting for its retry still holds"
    );
    assert!(
        claim_all(&*store, at(30), OnFailure::Block)
            .await
            .is_empty()
    );
    let again = claim_all(&*store, at(60), OnFailure::Block).await;
    assert_eq!(keys(&again), ["a1"]);
    assert_eq!(again[0].attempt, 2);
}

pub async fn a_failed_task_blocks_its_group_until_retried_or_resolved(store: S) {
    let a1 = put(&*store, grouped("a1", "A")).await;
    let a2 = put(&*store, grouped("a2", "A")).await;
    let c = claim_all(&*store, at(0), OnFailure::Block).await;
    end(&*store, &c[0], Status::Failed, AttemptOutcome::Failed).await;
    assert!(get(&*store, a2).await.parked);
    assert!(claim_all(&*store, at(5), OnFailure::Block).await.is_empty());
    let head = store
        .group_head(GroupHeadParams {
            kind: "k".into(),
            group: "A".into(),
        })
        .await
        .unwrap()
        .expect("the group waits for a task");
    assert_eq!((head.id, head.status), (a1, Status::Failed));
    assert_eq!(head.last_error.as_deref(), Some("HTTP 400: no such order"));

    // Retried: the failed task runs again first, and fails again.
    store.retry(manual(a1, at(10))).await.unwrap();
    let again = claim_all(&*store, at(10), OnFailure::Block).await;
    assert_eq!(keys(&again), ["a1"]);
    end(&*store, &again[0], Status::Failed, AttemptOutcome::Failed).await;
    assert!(
        claim_all(&*store, at(11), OnFailure::Block)
            .await
            .is_empty()
    );

    // Resolved: the group goes on.
    store.resolve(manual(a1, at(12))).await.unwrap();
    assert_eq!(
        keys(&claim_all(&*store, at(12), OnFailure::Block).await),
        ["a2"]
    );
}

pub async fn with_skip_a_failed_task_lets_its_group_go_on(store: S) {
    let a1 = put(&*store, grouped("a1", "A")).await;
    put(&*store, grouped("a2", "A")).await;
    let c = claim_all(&*store, at(0), OnFailure::Skip).await;
    end(&*store, &c[0], Status::Failed, AttemptOutcome::Failed).await;
    assert_eq!(
        get(&*store, a1).await.status,
        Status::Failed,
        "it stays a dead letter"
    );
    assert_eq!(
        keys(&claim_all(&*store, at(2), OnFailure::Skip).await),
        ["a2"]
    );
}

/// A dead letter of a kind that skips failures lets its group go; retried by hand it runs
/// again and holds its group again: a task enqueued after that waits behind it.
pub async fn with_skip_a_dead_letter_retried_by_hand_holds_its_group_again(store: S) {
    let a1 = put(&*store, grouped("a1", "A")).await;
    put(&*store, grouped("a2", "A")).await;
    let c = claim_all(&*store, at(0), OnFailure::Skip).await;
    end(&*store, &c[0], Status::Failed, AttemptOutcome::Failed).await;
    let c = claim_all(&*store, at(2), OnFailure::Skip).await;
    assert_eq!(keys(&c), ["a2"]);
    end(&*store, &c[0], Status::Succeeded, AttemptOutcome::Succeeded).await;

    store.retry(manual(a1, at(3))).await.unwrap();
    let a3 = put(&*store, grouped("a3", "A")).await;
    assert!(
        get(&*store, a3).await.parked,
        "a3 waits behind the retried a1"
    );
    let c = claim_all(&*store, at(4), OnFailure::Skip).await;
    assert_eq!(keys(&c), ["a1"]);
    end(&*store, &c[0], Status::Succeeded, AttemptOutcome::Succeeded).await;
    assert_eq!(
        keys(&claim_all(&*store, at(5), OnFailure::Skip).await),
        ["a3"]
    );
}

pub async fn every_end_of_a_task_unparks_the_next(store: S) {
    // Compensated by its target.
    put(&*store, grouped("c1", "C")).await;
    let c2 = put(&*store, grouped("c2", "C")).await;
    // Canceled while pending.
    let x1 = put(&*store, grouped("x1", "X")).await;
    let x2 = put(&*store, grouped("x2", "X")).await;
    // Expired while pending.
    let mut e1 = grouped("e1", "E");
    e1.expires_at = Some(at(0));
    let e1 = put(&*store, e1).await;
    let e2 = put(&*store, grouped("e2", "E")).await;

    store.cancel(manual(x1, at(0))).await.unwrap();
    assert!(!get(&*store, x2).await.parked, "a cancel unparks the next");
    let n = store
        .expire(ExpireParams {
            now: at(1),
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(get(&*store, e1).await.status, Status::Compensated);
    assert!(!get(&*store, e2).await.parked, "an expiry unparks the next");

    let c = claim_all(&*store, at(2), OnFailure::Block).await;
    assert_eq!(keys(&c), ["c1", "e2", "x2"]);
    let c1 = c.iter().find(|c| c.key == "c1").unwrap();
    end(&*store, c1, Status::Compensated, AttemptOutcome::Skipped).await;
    assert!(
        !get(&*store, c2).await.parked,
        "a compensation unparks the next"
    );
}

pub async fn a_parked_task_that_ends_is_parked_no_longer(store: S) {
    // Canceled by hand while parked behind p1.
    put(&*store, grouped("p1", "P")).await;
    let p2 = put(&*store, grouped("p2", "P")).await;
    assert!(get(&*store, p2).await.parked);
    store.cancel(manual(p2, at(0))).await.unwrap();
    let p2 = get(&*store, p2).await;
    assert_eq!(p2.status, Status::Compensated);
    assert!(!p2.parked, "a canceled task waits for nothing");
    assert_eq!(p2.run_at, t0(), "and keeps its own run_at");

    // Expired while parked behind q1.
    put(&*store, grouped("q1", "Q")).await;
    let mut q2 = grouped("q2", "Q");
    q2.expires_at = Some(at(0));
    let q2 = put(&*store, q2).await;
    assert!(get(&*store, q2).await.parked);
    let n = store
        .expire(ExpireParams {
            now: at(1),
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(n, 1, "a parked task expires like any other");
    let q2 = get(&*store, q2).await;
    assert_eq!(q2.status, Status::Compensated);
    assert!(!q2.parked, "an expired task waits for nothing");

    // Neither end moved the head: p1 and q1 are still the ones to claim.
    let c = claim_all(&*store, at(2), OnFailure::Block).await;
    assert_eq!(keys(&c), ["p1", "q1"]);
}

pub async fn a_rescued_task_holds_its_group_until_it_ends(store: S) {
    let mut r1 = grouped("r1", "R");
    r1.max_attempts = 2;
    let r1 = put(&*store, r1).await;
    let r2 = put(&*store, grouped("r2", "R")).await;
    let rescue = |now| store.rescue(RescueParams { now, limit: 100 });

    // Lease lapses with attempts left: pending again, still first.
    claim_all(&*store, at(0), OnFailure::Skip).await;
    let first = rescue(at(31)).await.unwrap();
    assert_eq!(get(&*store, r1).await.status, Status::Pending);
    assert!(get(&*store, r2).await.parked);
    // Lapses with its budget spent: failed; the kind skips failures, so the group goes on.
    let c = claim_all(&*store, at(40), OnFailure::Skip).await;
    assert_eq!(keys(&c), ["r1"]);
    let last = rescue(at(71)).await.unwrap();
    assert_eq!(get(&*store, r1).await.status, Status::Failed);
    // Each rescue names the task's group, so the engine can say when a dead letter holds it.
    for r in first.iter().chain(&last) {
        assert_eq!((r.id, r.group.as_deref()), (r1, Some("R")));
    }
    assert_eq!(last[0].status, Status::Failed);
    assert!(
        !get(&*store, r2).await.parked,
        "a failure that skips unparks the next"
    );
}

pub async fn groups_are_separate_per_kind(store: S) {
    put(&*store, grouped("a1", "A")).await;
    let mut other = task("other", "a1", "{}");
    other.group = Some("A".into());
    let o = put(&*store, other).await;
    assert!(
        !get(&*store, o).await.parked,
        "kind `other` has its own group A"
    );
}

pub async fn a_batch_orders_its_group_in_batch_order_and_repeats_keep_their_place(store: S) {
    let tasks: Vec<NewTask> = (0..5).map(|i| grouped(&format!("a{i}"), "A")).collect();
    let r = store
        .enqueue(EnqueueParams {
            tasks: tasks.clone(),
            now: t0(),
        })
        .await
        .unwrap();
    let mut seqs = Vec::new();
    for res in &r {
        seqs.push(get(&*store, res.id()).await.group_seq.expect("a place"));
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");

    // Enqueued again (an API caller's retry), even naming another group: nothing moves.
    let mut again = tasks[2].clone();
    again.id = TaskId::new();
    again.group = Some("B".into());
    let r2 = store
        .enqueue(EnqueueParams {
            tasks: vec![again],
            now: at(5),
        })
        .await
        .unwrap();
    assert_eq!(r2[0], EnqueueResult::Existing(r[2].id()));
    let t = get(&*store, r[2].id()).await;
    assert_eq!(
        (t.group.as_deref(), t.group_seq),
        (Some("A"), Some(seqs[2]))
    );

    // Drained one at a time, in that order.
    for (i, want) in r.iter().enumerate() {
        let c = claim_all(&*store, at(i as i64), OnFailure::Block).await;
        assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), vec![want.id()]);
        end(&*store, &c[0], Status::Succeeded, AttemptOutcome::Succeeded).await;
    }
}

pub async fn a_repeat_of_an_ended_task_does_not_park_a_new_one_behind_it(store: S) {
    // h1 runs and succeeds: group H has nothing open.
    let h1 = grouped("h1", "H");
    put(&*store, h1.clone()).await;
    let c = claim_all(&*store, at(0), OnFailure::Block).await;
    end(&*store, &c[0], Status::Succeeded, AttemptOutcome::Succeeded).await;

    // A producer's retry sends h1 again in one batch with a new h2 (and a new h3 after it).
    let mut again = h1;
    again.id = TaskId::new();
    let batch = vec![again, grouped("h2", "H"), grouped("h3", "H")];
    let r = put_all(&*store, batch, at(2)).await;
    assert!(matches!(r[0], EnqueueResult::Existing(_)), "{r:?}");
    let (h2, h3) = (get(&*store, r[1].id()).await, get(&*store, r[2].id()).await);
    assert!(
        !h2.parked,
        "the repeat added no open task, so nothing is before h2"
    );
    assert!(h3.parked, "h3 waits for h2");
    let c = claim_all(&*store, at(3), OnFailure::Block).await;
    assert_eq!(keys(&c), ["h2"]);
}

pub async fn one_batch_places_new_open_and_ended_groups_each_as_its_own(store: S) {
    // Before the batch: O has an open task, E's only task has ended, N does not exist.
    let o1 = put(&*store, grouped("o1", "O")).await;
    put(&*store, grouped("e1", "E")).await;
    let c = claim_all(&*store, at(0), OnFailure::Block).await;
    assert_eq!(keys(&c), ["e1", "o1"]);
    let e1 = c.iter().find(|c| c.key == "e1").expect("e1 claimed");
    end(&*store, e1, Status::Succeeded, AttemptOutcome::Succeeded).await;

    // One batch into all three, the groups interleaved.
    let batch = ["o2", "e2", "n1", "n2", "o3", "e3"]
        .map(|k| grouped(k, &k[..1].to_uppercase()))
        .to_vec();
    let r = put_all(&*store, batch, at(2)).await;
    let mut placed = Vec::new();
    for res in &r {
        let t = get(&*store, res.id()).await;
        placed.push((t.key, t.group_seq, t.parked));
    }
    let want = [
        ("o2", Some(2), true),  // behind o1, still running
        ("e2", Some(2), false), // E's first task ended: nothing is before e2
        ("n1", Some(1), false), // a new group
        ("n2", Some(2), true),  // behind n1 of the same batch
        ("o3", Some(3), true),
        ("e3", Some(3), true), // behind e2 of the same batch
    ]
    .map(|(k, seq, parked)| (k.to_string(), seq, parked));
    assert_eq!(placed, want);

    // What runs next: the head of each group, nothing behind one.
    let c = claim_all(&*store, at(3), OnFailure::Block).await;
    assert_eq!(keys(&c), ["e2", "n1"]);
    assert_eq!(
        get(&*store, o1).await.status,
        Status::Running,
        "O waits for o1"
    );
}

pub async fn group_head_and_list_show_a_group(store: S) {
    assert!(
        store
            .group_head(GroupHeadParams {
                kind: "k".into(),
                group: "A".into(),
            })
            .await
            .unwrap()
            .is_none(),
        "an unknown group waits for nothing"
    );
    let a1 = put(&*store, grouped("a1", "A")).await;
    let a2 = put(&*store, grouped("a2", "A")).await;
    put(&*store, grouped("b1", "B")).await;
    let head = |g: &str| {
        store.group_head(GroupHeadParams {
            kind: "k".into(),
            group: g.into(),
        })
    };
    assert_eq!(head("A").await.unwrap().map(|t| t.id), Some(a1));
    let listed = store
        .list(ListParams {
            kind: Some("k".into()),
            group: Some("A".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![a2, a1],
        "newest first"
    );
    let c = claim_all(&*store, at(0), OnFailure::Block).await;
    for c in &c {
        end(&*store, c, Status::Succeeded, AttemptOutcome::Succeeded).await;
    }
    assert_eq!(head("A").await.unwrap().map(|t| t.id), Some(a2));
    assert!(head("B").await.unwrap().is_none(), "every task of B ended");
}

pub async fn concurrent_enqueues_into_one_group_are_claimed_in_group_order(store: S) {
    // Twenty producers at once while a worker drains: whatever order their commits take,
    // the worker meets the group's tasks in ascending group_seq, each exactly once.
    let producers: Vec<_> = (0..20)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { put(&*store, grouped(&format!("p{i:02}"), "G")).await })
        })
        .collect();
    let mut seen: Vec<(i64, TaskId)> = Vec::new();
    let mut now = 0;
    while seen.len() < 20 {
        now += 1;
        let c = claim_all(&*store, at(now), OnFailure::Block).await;
        assert!(c.len() <= 1, "two tasks of one group claimed at once");
        for c in &c {
            let seq = get(&*store, c.id).await.group_seq.unwrap();
            seen.push((seq, c.id));
            end(&*store, c, Status::Succeeded, AttemptOutcome::Succeeded).await;
        }
        if c.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert!(now < 20_000, "the group drains");
    }
    let mut ids = Vec::new();
    for p in producers {
        ids.push(p.await.unwrap());
    }
    assert!(
        seen.windows(2).all(|w| w[0].0 < w[1].0),
        "claimed out of group order: {seen:?}"
    );
    let mut claimed: Vec<TaskId> = seen.iter().map(|s| s.1).collect();
    claimed.sort();
    ids.sort();
    assert_eq!(claimed, ids);
}

pub async fn enqueues_and_completions_across_many_groups_never_deadlock(store: S) {
    // Each write of many groups' tasks locks those groups' rows (a server store's way to keep
    // each group's order): an enqueue as it places its tasks, a completion as it unparks the
    // next tasks. Taken in different orders, they deadlocked; on PostgreSQL the completion was
    // aborted after a second, and a few in a row held up a process past its leases. Here two
    // producers enqueue a task in each of 40 groups, every round in another order of the
    // groups, while a worker claims and completes every group's head, last claimed first.
    const GROUPS: usize = 40;
    const ROUNDS: usize = 30;
    fn batch(producer: usize, round: usize) -> Vec<NewTask> {
        (0..GROUPS)
            .map(|i| {
                let g = (i * 7 + round * 13 + producer * 17) % GROUPS;
                grouped(&format!("p{producer}-r{round}-g{g}"), &format!("g{g:02}"))
            })
            .collect()
    }
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let store = store.clone();
            tokio::spawn(async move {
                for round in 0..ROUNDS {
                    store
                        .enqueue(EnqueueParams {
                            tasks: batch(p, round),
                            now: t0(),
                        })
                        .await
                        .unwrap_or_else(|e| panic!("producer {p}, round {round}: {e}"));
                }
            })
        })
        .collect();
    let total = 2 * GROUPS * ROUNDS;
    let (mut done, mut now) = (0, 0);
    while done < total {
        now += 1;
        let claimed = claim_all(&*store, at(now), OnFailure::Block).await;
        if claimed.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        } else {
            let completions = claimed
                .iter()
                .rev()
                .map(|c| completion(c, Status::Succeeded, AttemptOutcome::Succeeded, at(now)))
                .collect();
            let r = store
                .complete(CompleteParams {
                    completions,
                    starts: None,
                    claims: Vec::new(),
                    now: at(now),
                })
                .await
                .unwrap_or_else(|e| {
                    panic!("completing the heads of {} groups: {e}", claimed.len())
                });
            assert!(r.stale.is_empty(), "no lease was lost: {:?}", r.stale);
            done += claimed.len();
        }
        assert!(now < 200_000, "the groups drain ({done} of {total})");
    }
    for p in producers {
        p.await.unwrap();
    }
    let counts = store
        .counts(CountsParams {
            kind: Some("k".into()),
        })
        .await
        .unwrap();
    assert_eq!(counts.succeeded as usize, total);
}
