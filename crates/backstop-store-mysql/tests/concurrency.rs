//! Several stores (as several backstop processes would) on the same tables at once: claims
//! never share a task, racing enqueues of one `(kind, key)` create it once, racing transitions
//! of one new entity apply each event once, and concurrent migrations apply each version once.

mod common;

use backstop_core::store::*;
use backstop_core::*;
use backstop_store_mysql::MysqlStore;
use common::PrefixGuard;
use jiff::{SignedDuration, Timestamp};
use std::collections::HashSet;
use tokio::sync::Mutex;

/// The tests of this file run one at a time: one of them counts the server's deadlocks,
/// which the others' races would add to.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

fn task(kind: &str, key: String, payload: &str) -> NewTask {
    NewTask {
        id: TaskId::new(),
        kind: kind.into(),
        key,
        payload: payload.as_bytes().to_vec(),
        max_attempts: 3,
        run_at: Timestamp::UNIX_EPOCH,
        expires_at: None,
        traceparent: None,
        intake: Default::default(),
        origin: None,
        group: None,
    }
}

/// Claims and completes until nothing is due; returns the ids this worker got.
async fn drain(store: MysqlStore, worker: String, batch: usize) -> Vec<TaskId> {
    let now = Timestamp::now();
    let mut mine = Vec::new();
    loop {
        let got = store
            .claim(ClaimParams {
                kind: "k".into(),
                limit: batch,
                start: batch,
                owner: worker.clone(),
                now,
                lease_until: now + SignedDuration::from_secs(60),
                max_attempts: 3,
                on_group_failure: Default::default(),
                per_key: None,
            })
            .await
            .expect("claim");
        if got.is_empty() {
            return mine;
        }
        let done = got
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
                worker: worker.clone(),
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
            .expect("complete");
        assert!(r.stale.is_empty(), "{worker} lost a lease it just took");
        mine.extend(got.into_iter().map(|t| t.id));
    }
}

/// Two stores (as two processes) on one fresh ledger holding `n` due tasks of kind `k`.
async fn two_stores_with_due_tasks(n: usize) -> (PrefixGuard, MysqlStore, MysqlStore) {
    let guard = PrefixGuard::new();
    let a = guard.store().await;
    let b = guard.store().await;
    let tasks: Vec<_> = (0..n).map(|i| task("k", format!("c{i}"), "{}")).collect();
    a.enqueue(EnqueueParams {
        tasks,
        now: Timestamp::now(),
    })
    .await
    .unwrap();
    (guard, a, b)
}

/// Three workers on each store, claiming 1, 7 and 32 at a time, drain the ledger; returns
/// what each one got.
async fn drain_with_six_workers(a: &MysqlStore, b: &MysqlStore) -> Vec<Vec<TaskId>> {
    let mut workers = Vec::new();
    for (n, batch) in [1usize, 7, 32].into_iter().enumerate() {
        for (name, store) in [("a", a), ("b", b)] {
            workers.push(tokio::spawn(drain(
                store.clone(),
                format!("{name}{n}"),
                batch,
            )));
        }
    }
    let mut got = Vec::new();
    for w in workers {
        got.push(w.await.unwrap());
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_claiming_concurrently_never_share_a_task() {
    if common::skip() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let (_guard, a, b) = two_stores_with_due_tasks(1200).await;
    let mut seen = HashSet::new();
    for got in drain_with_six_workers(&a, &b).await {
        for id in got {
            assert!(seen.insert(id), "task {id} was claimed twice");
        }
    }
    assert_eq!(seen.len(), 1200);
    let counts = b
        .counts(CountsParams {
            kind: Some("k".into()),
        })
        .await
        .unwrap();
    assert_eq!(counts.succeeded, 1200);
    assert_eq!(counts.total(), 1200);
}

/// Completions lock exactly the rows they name, in one order: racing claims and completions
/// of two stores never deadlock (each deadlock costs a rolled-back batch and a retry, and a
/// run of bad luck under load ran out of tries in CI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_claims_and_completions_never_deadlock() {
    if common::skip() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let (_guard, a, b) = two_stores_with_due_tasks(1200).await;
    let before = common::deadlocks().await;
    let done: usize = drain_with_six_workers(&a, &b)
        .await
        .iter()
        .map(Vec::len)
        .sum();
    assert_eq!(done, 1200);
    let after = common::deadlocks().await;
    assert_eq!(
        after - before,
        0,
        "InnoDB detected deadlocks while draining"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_enqueues_of_one_key_create_it_once() {
    if common::skip() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let guard = PrefixGuard::new();
    let a = guard.store().await;
    let b = guard.store().await;
    let claimer = tokio::spawn(drain(a.clone(), "claimer".into(), 10));
    // Round after round, six enqueues (from both stores, alone or in batches with other keys,
    // in either order) start together on one key with one payload: each key is created once,
    // every other enqueue finds it, and none fails.
    for round in 0..40 {
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(6));
        let racers: Vec<_> = (0..6)
            .map(|n| {
                let store = if n % 2 == 0 { a.clone() } else { b.clone() };
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let mut tasks = vec![task("k", format!("r{round}"), r#"{"n":1}"#)];
                    if n >= 2 {
                        tasks.push(task("k", format!("r{round}-{n}"), "{}"));
                    }
                    if n >= 4 {
                        tasks.reverse();
                    }
                    let at = tasks
                        .iter()
                        .position(|t| t.key == format!("r{round}"))
                        .unwrap();
                    barrier.wait().await;
                    let r = store
                        .enqueue(EnqueueParams {
                            tasks,
                            now: Timestamp::now(),
                        })
                        .await
                        .expect("enqueue");
                    r[at].clone()
                })
            })
            .collect();
        let mut created = 0;
        let mut ids = HashSet::new();
        for r in racers {
            let r = r.await.unwrap();
            ids.insert(r.id());
            match r {
                EnqueueResult::Created(_) => created += 1,
                EnqueueResult::Existing(_) => {}
                EnqueueResult::Conflict(id) => panic!("r{round}: conflict with {id}"),
            }
        }
        assert_eq!(created, 1, "r{round} created {created} times");
        assert_eq!(ids.len(), 1, "r{round} has several ids");
    }
    claimer.await.unwrap();
    assert_eq!(
        a.counts(CountsParams {
            kind: Some("k".into())
        })
        .await
        .unwrap()
        .total(),
        40 * 5
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_transitions_from_several_stores_apply_each_event_once() {
    if common::skip() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let guard = PrefixGuard::new();
    let mut stores: Vec<std::sync::Arc<dyn Store>> = Vec::new();
    for _ in 0..5 {
        stores.push(std::sync::Arc::new(guard.store().await));
    }
    backstop_store_tests::cases::racing_stores_apply_each_event_once(stores, 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_migrations_apply_each_version_once() {
    if common::skip() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let guard = PrefixGuard::new();
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(MysqlStore::connect(guard.options()).await.unwrap());
    }
    let runs: Vec<_> = stores
        .iter()
        .map(|s| {
            let s = s.clone();
            tokio::spawn(async move { s.migrate().await })
        })
        .collect();
    for r in runs {
        r.await.unwrap().expect("migrate");
    }
    let url = backstop_store_mysql::MysqlOptions::from_url(&guard.url)
        .unwrap()
        .url;
    let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
    let versions: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT version FROM {}schema ORDER BY version",
        guard.prefix
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        versions,
        (1..=MysqlStore::known_schema_version()).collect::<Vec<_>>()
    );
    pool.close().await;
}
