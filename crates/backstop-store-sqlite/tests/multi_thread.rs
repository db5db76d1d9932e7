//! The per-task paths call SQLite directly on the locked writer and, on a multi-thread runtime,
//! inside `block_in_place`: enqueue, claim and complete concurrently there, as the engine does.

use backstop_core::store::*;
use backstop_core::*;
use backstop_store_sqlite::SqliteStore;
use std::collections::HashSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_on_a_multi_thread_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("mt.db").display().to_string())
        .await
        .unwrap();
    let now = jiff::Timestamp::now();
    let enqueues: Vec<_> = (0..8)
        .map(|b| {
            let store = store.clone();
            tokio::spawn(async move {
                let tasks = (0..250)
                    .map(|i| NewTask {
                        id: TaskId::new(),
                        kind: "k".into(),
                        key: format!("{b}-{i}"),
                        payload: br#"{"n":1}"#.to_vec(),
                        max_attempts: 3,
                        run_at: now,
                        expires_at: None,
                        traceparent: None,
                        intake: Default::default(),
                        origin: None,
                        group: None,
                    })
                    .collect();
                store.enqueue(EnqueueParams { tasks, now }).await.unwrap()
            })
        })
        .collect();
    for e in enqueues {
        let created = e.await.unwrap();
        assert!(
            created
                .iter()
                .all(|r| matches!(r, EnqueueResult::Created(_)))
        );
    }
    let claims: Vec<_> = (0..4)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let c = store
                        .claim(ClaimParams {
                            kind: "k".into(),
                            limit: 70,
                            start: 70,
                            owner: format!("w{w}"),
                            now,
                            lease_until: now + jiff::SignedDuration::from_secs(60),
                            max_attempts: 3,
                            on_group_failure: Default::default(),
                            per_key: None,
                        })
                        .await
                        .unwrap();
                    if c.is_empty() {
                        return mine;
                    }
                    let done = c
                        .iter()
                        .map(|t| Completion {
                            lease: LeaseRef {
                                id: t.id,
                                epoch: t.epoch,
                            },
                            attempt: t.attempt,
                            status: Status::Succeeded,
                            run_at: None,
                            last_error: None,
                            reason: None,
                            outcome: AttemptOutcome::Succeeded,
                            http_status: Some(200),
                            note: None,
                            started_at: now,
                            ended_at: now,
                            worker: format!("w{w}"),
                        })
                        .collect();
                    let r = store
                        .complete(CompleteParams {
                            starts: None,
                            completions: done,
                            claims: Vec::new(),
                            now,
                        })
                        .await
                        .unwrap();
                    assert!(r.stale.is_empty());
                    mine.extend(c.into_iter().map(|t| t.id));
                }
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for c in claims {
        for id in c.await.unwrap() {
            assert!(seen.insert(id), "claimed twice: {id}");
        }
    }
    assert_eq!(seen.len(), 2000);
    let counts = store
        .counts(CountsParams {
            kind: Some("k".into()),
        })
        .await
        .unwrap();
    assert_eq!(counts.succeeded, 2000);
    assert_eq!(counts.total(), 2000);
}
