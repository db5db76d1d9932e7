//! The reconciler's leader is SIGKILLed in the middle of a rescue pass over tens of thousands
//! of expired leases; another process becomes leader and finishes the pass. Every task is
//! rescued exactly once: no task appears in both leaders' logs, and each timeline holds one
//! lost attempt.

use crate::common::db::{Server, TestDb};
use crate::common::*;
use backstop::{Status, Store, TaskId};
use backstop_core::store::{ClaimParams, EnqueueParams};
use backstop_core::store::{CountsParams, GetParams, TimelineParams};
use backstop_core::{AttemptOutcome, EventType, NewTask};
use jiff::{SignedDuration, Timestamp};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

const TASKS: usize = 40_000;
const KIND: &str = "crash.reconcile";

fn config(db: &str) -> String {
    // A pull kind: nothing dispatches it, so rescued tasks stay pending to be counted.
    format!(
        "database = \"{db}\"\n\
         [engine]\npoll_interval = \"50ms\"\nrescue_interval = \"100ms\"\ngrace = \"1s\"\n\
         leader_lease = \"2s\"\nleader_renew = \"200ms\"\n\
         [kinds.\"{KIND}\"]\ntarget = \"pull\"\nmax_attempts = 5\n"
    )
}

/// Task ids the process logged as rescued.
fn rescued_in(log: &str) -> HashSet<String> {
    log.lines()
        .filter(|l| l.contains("rescued a task whose lease expired"))
        .filter_map(|l| logged(l, "rescued", "task"))
        .collect()
}

async fn pending(store: &Arc<dyn Store>) -> usize {
    store
        .counts(CountsParams {
            kind: Some(KIND.to_string()),
        })
        .await
        .unwrap()
        .pending as usize
}

pub async fn a_leader_killed_mid_pass_leaves_the_rest_to_the_next(server: Server) {
    let Some(testdb) = TestDb::new(server) else {
        return;
    };
    let db = testdb.url();
    let store = backstop::open_store(&db).await.unwrap();
    // Every task leased by a worker that then vanished, its lease long expired.
    let past: Timestamp = Timestamp::now() - SignedDuration::from_mins(10);
    let mut ids: Vec<TaskId> = Vec::with_capacity(TASKS);
    for chunk in 0..TASKS / 1000 {
        let tasks: Vec<NewTask> = (0..1000)
            .map(|i| NewTask {
                id: TaskId::new(),
                kind: KIND.into(),
                key: format!("k{}", chunk * 1000 + i),
                payload: b"{}".to_vec(),
                max_attempts: 5,
                run_at: past,
                expires_at: None,
                traceparent: None,
                intake: Default::default(),
                origin: None,
                group: None,
            })
            .collect();
        ids.extend(tasks.iter().map(|t| t.id));
        store
            .enqueue(EnqueueParams { tasks, now: past })
            .await
            .unwrap();
        store
            .claim(ClaimParams {
                kind: KIND.into(),
                limit: 1000,
                start: 1000,
                owner: "vanished-worker".into(),
                now: past,
                lease_until: past + SignedDuration::from_secs(30),
                max_attempts: 5,
                on_group_failure: Default::default(),
                per_key: None,
            })
            .await
            .unwrap();
    }
    assert_eq!(pending(&store).await, 0, "every task is leased");

    let first = Workdir::new(&config(&db));
    let mut a = first.serve();
    // Kill it once part, but not all, of the work is done.
    let mut seen = 0;
    for _ in 0..6000 {
        seen = pending(&store).await;
        if seen > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    signal(&a, libc::SIGKILL);
    assert!(!a.wait().await.unwrap().success());
    let at_kill = pending(&store).await;
    println!("killed the leader with {at_kill} of {TASKS} rescued (saw {seen})");
    assert!(at_kill > 0, "the leader had started its pass");
    assert!(at_kill < TASKS, "the leader was killed mid-pass");

    let second = Workdir::new(&config(&db));
    let _b = second.serve();
    wait_for(
        Duration::from_secs(60),
        "the next leader to finish the pass",
        || {
            let store = store.clone();
            async move { (pending(&store).await == TASKS).then_some(()) }
        },
    )
    .await;
    assert!(second.serve_log().contains("became leader"));

    let by_a = rescued_in(&first.serve_log());
    let by_b = rescued_in(&second.serve_log());
    println!(
        "rescues logged: first leader {}, second {}",
        by_a.len(),
        by_b.len()
    );
    assert!(!by_b.is_empty(), "the second leader finished the work");
    assert!(by_a.len() + by_b.len() <= TASKS);
    assert!(by_a.is_disjoint(&by_b), "no task rescued by both leaders");
    let c = store
        .counts(CountsParams {
            kind: Some(KIND.to_string()),
        })
        .await
        .unwrap();
    assert_eq!((c.pending as usize, c.running), (TASKS, 0));
    // Each timeline (a spread sample) holds exactly one lost attempt, by the vanished worker.
    for id in ids.iter().step_by(TASKS / 200) {
        let t = store.get(GetParams { id: *id }).await.unwrap().unwrap();
        assert_eq!((t.status, t.attempts), (Status::Pending, 1), "{id}");
        let lost: Vec<_> = store
            .timeline(TimelineParams { id: *id })
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == EventType::Attempt)
            .collect();
        assert_eq!(lost.len(), 1, "{id}: {lost:?}");
        assert_eq!(lost[0].outcome, Some(AttemptOutcome::LeaseExpired));
        assert!(
            lost[0]
                .error
                .as_deref()
                .unwrap()
                .contains("vanished-worker")
        );
    }
}
