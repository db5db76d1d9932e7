//! Ordering per group where MySQL / MariaDB differ from the other stores: migration 11 carries
//! a ledger forward and is finished after an interruption, and the ends of grouped tasks (which
//! promote in the store's code, not in a trigger) race enqueues into the same groups without a
//! deadlock.

mod common;

use backstop_core::store::*;
use backstop_core::*;
use backstop_store_mysql::{MysqlOptions, MysqlStore};
use backstop_store_tests::fixtures::completion;
use common::PrefixGuard;
use jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

fn task(key: &str, group: Option<&str>) -> NewTask {
    NewTask {
        id: TaskId::new(),
        kind: "k".into(),
        key: key.into(),
        payload: b"{}".to_vec(),
        max_attempts: 3,
        run_at: Timestamp::UNIX_EPOCH,
        expires_at: None,
        traceparent: None,
        intake: Default::default(),
        origin: None,
        group: group.map(String::from),
    }
}

async fn put(store: &MysqlStore, t: NewTask) -> TaskId {
    let r = store
        .enqueue(EnqueueParams {
            tasks: vec![t],
            now: Timestamp::UNIX_EPOCH,
        })
        .await
        .unwrap();
    r[0].id()
}

async fn get(store: &MysqlStore, id: TaskId) -> Task {
    store.get(GetParams { id }).await.unwrap().unwrap()
}

/// As a run of migration 11 left it that stopped just after dropping the trigger (its last
/// but one statement): the next run takes the columns, index and table already there as done,
/// creates the trigger, and the tasks from before keep their place outside any group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_groups_migration_is_finished_by_the_next_run() {
    if common::skip() {
        return;
    }
    let guard = PrefixGuard::new();
    let store = guard.store().await;
    let before = put(&store, task("old", None)).await;
    let url = MysqlOptions::from_url(&guard.url).unwrap().url;
    let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
    let p = &guard.prefix;
    for sql in [
        format!("DROP TRIGGER {p}tasks_grp"),
        format!("DELETE FROM {p}schema WHERE version >= 11"),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
    store.migrate().await.expect("the migration finishes");
    let old = get(&store, before).await;
    assert_eq!((old.group, old.group_seq, old.parked), (None, None, false));
    put(&store, task("a1", Some("A"))).await;
    let a2 = put(&store, task("a2", Some("A"))).await;
    assert!(get(&store, a2).await.parked, "the trigger parks again");
}

/// Two stores enqueue single tasks into four groups (so that group commits mix groups in one
/// statement) while six workers claim and complete: each group runs one task at a time in
/// group order, every task runs once, and InnoDB never detects a deadlock (an ender never
/// waits for a group while it holds task rows; batches lock groups in one order).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grouped_ends_racing_grouped_enqueues_never_deadlock() {
    if common::skip() {
        return;
    }
    const GROUPS: usize = 4;
    const PER_GROUP: usize = 40;
    let guard = PrefixGuard::new();
    let (a, b) = (guard.store().await, guard.store().await);
    let before = common::deadlocks().await;
    let producers: Vec<_> = (0..8)
        .map(|p| {
            let store = if p % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move {
                for i in (p..GROUPS * PER_GROUP).step_by(8) {
                    let group = format!("g{}", i % GROUPS);
                    put(&store, task(&format!("t{i:03}"), Some(&group))).await;
                }
            })
        })
        .collect();
    let running: Arc<Mutex<HashMap<String, TaskId>>> = Default::default();
    let seen: Arc<Mutex<Vec<(String, i64)>>> = Default::default();
    let workers: Vec<_> = (0..6)
        .map(|w| {
            let store = if w % 2 == 0 { a.clone() } else { b.clone() };
            let (running, seen) = (running.clone(), seen.clone());
            tokio::spawn(async move { work(store, w, running, seen).await })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    for w in workers {
        w.await.unwrap();
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), GROUPS * PER_GROUP, "every task ran once");
    for g in 0..GROUPS {
        let group = format!("g{g}");
        let seqs: Vec<i64> = seen
            .iter()
            .filter(|(s, _)| *s == group)
            .map(|s| s.1)
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "{group} out of order: {seqs:?}"
        );
    }
    assert_eq!(
        common::deadlocks().await - before,
        0,
        "InnoDB detected deadlocks"
    );
}

/// Claims and completes until every task ran; notes each claimed task's group and place.
async fn work(
    store: MysqlStore,
    w: usize,
    running: Arc<Mutex<HashMap<String, TaskId>>>,
    seen: Arc<Mutex<Vec<(String, i64)>>>,
) {
    let mut idle = 0;
    while idle < 200 {
        let now = Timestamp::now();
        let claimed = store
            .claim(ClaimParams {
                kind: "k".into(),
                limit: 4,
                start: 4,
                owner: format!("w{w}"),
                now,
                lease_until: now + SignedDuration::from_secs(60),
                max_attempts: 3,
                on_group_failure: Default::default(),
                per_key: None,
            })
            .await
            .unwrap();
        if claimed.is_empty() {
            idle += 1;
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            continue;
        }
        idle = 0;
        let mut done = Vec::new();
        for c in &claimed {
            let group = c.group.clone().expect("a grouped task");
            let seq = get(&store, c.id).await.group_seq.unwrap();
            let other = running.lock().unwrap().insert(group.clone(), c.id);
            assert_eq!(other, None, "two tasks of {group} at once");
            seen.lock().unwrap().push((group, seq));
            let mut c = completion(c, Status::Succeeded, AttemptOutcome::Succeeded, now);
            c.worker = format!("w{w}");
            done.push(c);
        }
        // Out of the running set before the commit that lets the next one be claimed.
        for c in &claimed {
            running.lock().unwrap().remove(c.group.as_deref().unwrap());
        }
        let r = store
            .complete(CompleteParams {
                completions: done,
                starts: None,
                claims: Vec::new(),
                now,
            })
            .await
            .unwrap();
        assert!(r.stale.is_empty());
    }
}
