//! Leader election between engines that share one SQLite file, each with its own connections
//! as separate processes would have: one leads, the singleton duties run only there, and
//! leadership moves on when the leader stops, dies or is cut off from the database.

mod cut;

use backstop_core::store::{ClaimParams, LeadershipParams, ResignParams};
use backstop_core::store::{GetParams, TimelineParams};
use backstop_core::{AttemptOutcome, KindConfig, Outcome, Status, Store, Target};
use backstop_engine::leader::SINGLETONS;
use backstop_engine::{Engine, EngineOptions, EnqueueRequest, handler};
use backstop_store_sqlite::SqliteStore;
use cut::Cut;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

const LEASE: Duration = Duration::from_millis(1500);
const RENEW: Duration = Duration::from_millis(150);

async fn open(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let path = dir.path().join("shared.db").display().to_string();
    Arc::new(SqliteStore::open(&path).await.unwrap())
}

fn engine(store: Arc<dyn Store>, worker: &str) -> Engine {
    let mut k = KindConfig::new("job", Target::InProcess);
    k.lease = Duration::from_secs(5);
    Engine::builder(store)
        .kind(k)
        .handler("job", handler(|_| async { Outcome::Success }))
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            rescue_interval: Duration::from_millis(50),
            grace: Duration::from_millis(200),
            leader_lease: LEASE,
            leader_renew: RENEW,
            worker_id: Some(worker.into()),
            ..Default::default()
        })
        .build()
        .unwrap()
}

/// Runs the engine in the background; the returned sender stops it.
fn spawn(engine: &Engine) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = oneshot::channel::<()>();
    let e = engine.clone();
    let h = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    (tx, h)
}

/// Polls every 5 ms until `f` holds, asserting on every poll that the engines never both
/// lead; panics after `limit`. Returns how long it took.
async fn until(
    engines: [&Engine; 2],
    limit: Duration,
    what: &str,
    f: impl Fn() -> bool,
) -> Duration {
    let start = Instant::now();
    loop {
        assert!(
            !(engines[0].is_leader() && engines[1].is_leader()),
            "two leaders at once"
        );
        if f() {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_engine_leads_and_another_takes_over_at_once_when_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (engine(open(&dir).await, "a"), engine(open(&dir).await, "b"));
    let (stop_a, run_a) = spawn(&a);
    let (stop_b, run_b) = spawn(&b);
    let both = [&a, &b];
    until(both, LEASE, "a leader", || a.is_leader() || b.is_leader()).await;
    // It stays put while it renews.
    tokio::time::sleep(LEASE * 2).await;
    let (leader, follower, stop_leader, run_leader, stop_follower, run_follower) = if a.is_leader()
    {
        (&a, &b, stop_a, run_a, stop_b, run_b)
    } else {
        (&b, &a, stop_b, run_b, stop_a, run_a)
    };
    assert!(leader.is_leader() && !follower.is_leader());
    stop_leader.send(()).unwrap();
    run_leader.await.unwrap();
    assert!(!leader.is_leader(), "a stopped engine does not lead");
    let took = until(both, LEASE, "the follower to take over", || {
        follower.is_leader()
    })
    .await;
    assert!(
        took < LEASE,
        "a resigned leadership is taken without waiting for the lease: {took:?}"
    );
    stop_follower.send(()).unwrap();
    run_follower.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_steps_down_before_its_lease_ends_and_another_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let cut = Cut::new(open(&dir).await);
    let a = engine(cut.clone(), "a");
    let b = engine(open(&dir).await, "b");
    let both = [&a, &b];
    let _run_a = spawn(&a);
    until(both, LEASE, "a to lead", || a.is_leader()).await;
    let _run_b = spawn(&b);
    tokio::time::sleep(RENEW * 3).await;
    assert!(a.is_leader() && !b.is_leader(), "the first leader keeps it");

    // Its renewals hang from now on; its last granted lease began before this instant.
    cut.cut();
    let stepped_down = until(both, LEASE, "a to step down", || !a.is_leader()).await;
    assert!(
        stepped_down < LEASE,
        "a leader steps down before its lease runs out: {stepped_down:?}"
    );
    let took = until(both, LEASE + RENEW * 4, "b to take over", || b.is_leader()).await;
    println!("a stepped down after {stepped_down:?}; b led {took:?} later");
    assert!(
        stepped_down + took <= LEASE + RENEW * 3,
        "b takes over within the lease and a renewal: {:?}",
        stepped_down + took
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_rescues_stranded_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let b = engine(open(&dir).await, "b");
    // Another process leads for the next hour and does nothing.
    let now = jiff::Timestamp::now();
    store
        .acquire_leadership(LeadershipParams {
            name: SINGLETONS.into(),
            owner: "ghost".into(),
            now,
            until: now + jiff::SignedDuration::from_secs(3600),
        })
        .await
        .unwrap();
    // A task leased by a process that died: its lease ran out long ago.
    let id = b
        .enqueue(EnqueueRequest {
            kind: "job".into(),
            key: "stranded".into(),
            payload: b"{}".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap()
        .id;
    let now = jiff::Timestamp::now();
    let claimed = store
        .claim(ClaimParams {
            kind: "job".into(),
            limit: 1,
            start: 1,
            owner: "dead".into(),
            now,
            lease_until: now + jiff::SignedDuration::from_millis(10),
            max_attempts: 3,
            on_group_failure: Default::default(),
            per_key: None,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let (stop, run) = spawn(&b);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!b.is_leader());
    assert_eq!(
        store.get(GetParams { id }).await.unwrap().unwrap().status,
        Status::Running,
        "a process that does not lead rescues nothing"
    );
    assert!(
        store
            .resign_leadership(ResignParams {
                name: SINGLETONS.into(),
                owner: "ghost".into(),
            })
            .await
            .unwrap()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while store.get(GetParams { id }).await.unwrap().unwrap().status != Status::Succeeded {
        assert!(Instant::now() < deadline, "the new leader rescues the task");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(b.is_leader());
    let outcomes: Vec<_> = store
        .timeline(TimelineParams { id })
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| e.outcome)
        .collect();
    assert_eq!(
        outcomes,
        vec![AttemptOutcome::LeaseExpired, AttemptOutcome::Succeeded]
    );
    stop.send(()).unwrap();
    run.await.unwrap();
}
