//! Faults on PostgreSQL, each while an engine drains 2,000 in-process tasks: the backend
//! connections killed (`pg_terminate_backend`), the pool saturated behind a locked table, and
//! (opted into with `BACKSTOP_TEST_PG_RESTART=1`, as it restarts the machine's whole cluster)
//! the server restarting. Each stalls the work for at most a few seconds; afterwards
//! everything resumes by itself and every task ends `succeeded`, nothing lost, a task run
//! twice only where it was claimed twice (its lease was lost). Each case on a fresh schema of
//! the server named by `BACKSTOP_TEST_POSTGRES_URL`; without it, each case says `skipped:`
//! and passes.

mod common;
mod rig;

use backstop_core::store::CountsParams;
use backstop_core::store::{Enqueue, Tasks};
use backstop_core::store::{EnqueueParams, ListParams};
use backstop_core::{KindConfig, NewTask, Status, Target, TaskId};
use backstop_engine::EngineOptions;
use common::skip;
use jiff::Timestamp;
use rig::{KIND, Rig, Started};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

const TASKS: usize = 2000;

/// Starts an engine (pool of `max_connections`, leases of `lease`) and enqueues [`TASKS`].
async fn loaded(max_connections: u32, lease: Duration) -> (Rig, Vec<TaskId>) {
    let mut kind = KindConfig::new(KIND, Target::InProcess);
    kind.concurrency = 16;
    kind.lease = lease;
    let opts = EngineOptions {
        rescue_interval: Duration::from_millis(500),
        ..EngineOptions::default()
    };
    // Each attempt takes 20 ms: 16 at once drain 2,000 tasks in about 2.5 s.
    let rig = Rig::start(opts, kind, max_connections, Duration::from_millis(20)).await;
    let mut ids = Vec::new();
    for chunk in 0..TASKS / 500 {
        let tasks: Vec<NewTask> = (0..500)
            .map(|i| NewTask {
                id: TaskId::new(),
                kind: KIND.into(),
                key: format!("t-{}", chunk * 500 + i),
                payload: b"{}".to_vec(),
                max_attempts: 20,
                run_at: Timestamp::now(),
                expires_at: None,
                traceparent: None,
                intake: Default::default(),
                origin: None,
                group: None,
            })
            .collect();
        ids.extend(tasks.iter().map(|t| t.id));
        rig.store
            .enqueue(EnqueueParams {
                tasks,
                now: Timestamp::now(),
            })
            .await
            .expect("enqueue");
    }
    (rig, ids)
}

/// Lets `before` tasks start, runs `fault`, and waits (up to `within`) for every task to
/// succeed; then checks that nothing was lost or run twice without a lost lease, and returns
/// the longest pause between two starts.
async fn survive<F: Future<Output = ()> + Send + 'static>(
    rig: &mut Rig,
    ids: &[TaskId],
    before: usize,
    fault: F,
    within: Duration,
) -> Duration {
    let mut starts: Vec<Started> = rig.starts(before, Duration::from_secs(20)).await;
    assert_eq!(starts.len(), before, "the drain did not get going");
    let fault_at = Instant::now();
    let fault = tokio::spawn(fault);
    let deadline = Instant::now() + within;
    let mut check = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            Some(s) = rig.started.recv() => starts.push(s),
            _ = check.tick() => {
                if fault.is_finished() {
                    let c = rig.store.counts(CountsParams::default()).await;
                    if c.as_ref().is_ok_and(|c| c.succeeded == ids.len() as u64) {
                        break;
                    }
                }
                assert!(
                    Instant::now() < deadline,
                    "not every task succeeded within {within:?}: {:?}",
                    rig.store.counts(CountsParams::default()).await
                );
            }
        }
    }
    fault.await.expect("the fault");
    // Starts that raced the last check.
    while let Ok(s) = rig.started.try_recv() {
        starts.push(s);
    }
    let tasks = rig
        .store
        .list(ListParams {
            limit: ids.len() + 10,
            ..ListParams::default()
        })
        .await
        .expect("list");
    assert_eq!(tasks.len(), ids.len(), "exactly the tasks enqueued");
    let mut runs: HashMap<TaskId, u32> = HashMap::new();
    for s in &starts {
        *runs.entry(s.id).or_default() += 1;
    }
    let mut twice = 0;
    for t in &tasks {
        assert_eq!(t.status, Status::Succeeded, "task {}", t.id);
        let n = runs.get(&t.id).copied().unwrap_or(0);
        assert!(n >= 1, "task {} succeeded without running", t.id);
        // Each run was a claim of its own: a task ran again only after its lease was lost
        // (and every run carried the same id, the idempotency key).
        assert!(
            u64::from(n) <= u64::from(t.attempts),
            "task {} ran {n} times in {} claims",
            t.id,
            t.attempts
        );
        if n > 1 {
            twice += 1;
        }
    }
    starts.sort_by_key(|s| s.at);
    let gap = starts
        .windows(2)
        .filter(|w| w[1].at > fault_at)
        .map(|w| w[1].at - w[0].at)
        .max()
        .unwrap_or_default();
    let last = starts.last().expect("some").at;
    eprintln!(
        "{} starts for {} tasks ({twice} run more than once); longest pause {:.0} ms; \
         done {:.1} s after the fault began",
        starts.len(),
        ids.len(),
        gap.as_secs_f64() * 1000.0,
        (last - fault_at).as_secs_f64()
    );
    gap
}

async fn admin(url: &str) -> PgConnection {
    PgConnection::connect(url).await.expect("admin connection")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_backend_connections_stall_work_briefly() {
    if skip() {
        return;
    }
    let (mut rig, ids) = loaded(8, Duration::from_secs(5)).await;
    let (url, app) = (rig.guard.options().url, rig.app.clone());
    // Every connection of the engine's (pool and listener), ten times over two seconds: busy
    // ones mid-statement (claims, completions, heartbeats) as well as idle ones.
    let fault = async move {
        let mut c = admin(&url).await;
        let mut total = 0;
        for _ in 0..10 {
            let killed: i64 = sqlx::query_scalar(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE application_name LIKE $1 || '%' AND pid <> pg_backend_pid()",
            )
            .bind(&app)
            .fetch_one(&mut c)
            .await
            .expect("pg_terminate_backend");
            total += killed;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        eprintln!("killed {total} connections in 10 rounds");
    };
    let gap = survive(&mut rig, &ids, 300, fault, Duration::from_secs(60)).await;
    assert!(gap < Duration::from_secs(5), "work stalled for {gap:?}");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_pool_stalls_work_briefly() {
    if skip() {
        return;
    }
    // Two connections, both taken by reads stuck behind a table lock for 3 s, with more reads
    // queued for the pool behind them.
    let hold = Duration::from_secs(3);
    let (mut rig, ids) = loaded(2, Duration::from_secs(30)).await;
    let (url, schema) = (rig.guard.options().url, rig.guard.schema.clone());
    let store = rig.store.clone();
    let fault = async move {
        let mut c = admin(&url).await;
        let mut tx = c.begin().await.expect("begin");
        sqlx::raw_sql(AssertSqlSafe(format!(
            "LOCK TABLE {schema}.tasks IN ACCESS EXCLUSIVE MODE"
        )))
        .execute(&mut *tx)
        .await
        .expect("lock");
        let reads: Vec<_> = (0..6)
            .map(|_| {
                let s = store.clone();
                tokio::spawn(async move { s.counts(CountsParams::default()).await })
            })
            .collect();
        tokio::time::sleep(hold).await;
        tx.commit().await.expect("unlock");
        for r in reads {
            r.await
                .expect("read task")
                .expect("a read waits, then answers");
        }
    };
    let gap = survive(&mut rig, &ids, 300, fault, Duration::from_secs(60)).await;
    assert!(
        gap < hold + Duration::from_secs(3),
        "work stalled for {gap:?}"
    );
    rig.stop().await;
}

/// Restarts the machine's PostgreSQL cluster mid-run. It is shared with every other test and
/// program on the machine, so it runs only when `BACKSTOP_TEST_PG_RESTART=1` as well, e.g.
///
/// ```text
/// BACKSTOP_TEST_PG_RESTART=1 BACKSTOP_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test \
///     cargo test -p backstop-store-postgres --test faults -- a_server_restart
/// ```
///
/// (as a user allowed to run `pg_ctlcluster`); killing the connections above is its everyday
/// stand-in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restart_stalls_work_briefly() {
    if skip() {
        return;
    }
    if std::env::var("BACKSTOP_TEST_PG_RESTART").ok().as_deref() != Some("1") {
        eprintln!("skipped: BACKSTOP_TEST_PG_RESTART=1 is not set (this restarts the cluster)");
        return;
    }
    let (mut rig, ids) = loaded(8, Duration::from_secs(5)).await;
    let fault = async move {
        let t0 = Instant::now();
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg("pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main restart")
            .output()
            .await
            .expect("run pg_ctlcluster");
        assert!(out.status.success(), "restart failed: {out:?}");
        eprintln!(
            "restarted PostgreSQL in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
    };
    let gap = survive(&mut rig, &ids, 300, fault, Duration::from_secs(90)).await;
    assert!(gap < Duration::from_secs(15), "work stalled for {gap:?}");
    rig.wait_for_listener(None, Duration::from_secs(10)).await;
    rig.stop().await;
}
