//! Three `backstop serve` processes on one PostgreSQL schema: they split the work, no attempt
//! runs twice while its lease is valid, one of them leads, and when the leader is SIGKILLed
//! another takes over within seconds and rescues what the dead one held.
//!
//! Needs `BACKSTOP_TEST_POSTGRES_URL`; without it the test says `skipped:` and passes.

mod common;

use backstop::{Engine, EnqueueRequest, EventType, KindConfig, Status, Store, Target, TaskId};
use backstop_core::AttemptOutcome;
use backstop_core::store::ListParams;
use backstop_core::store::{CountsParams, GetParams, TimelineParams};
use common::db::{Server, TestDb};
use common::*;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROCESSES: usize = 3;
const FAST_TASKS: usize = 500;
const SLOW_TASKS: usize = 120;
/// `[engine] leader_lease` and `leader_renew` of the processes.
const LEADER_LEASE: Duration = Duration::from_secs(2);
const LEADER_RENEW: Duration = Duration::from_millis(200);

fn config(base: &str, db: &str) -> String {
    let mut c = format!(
        "database = \"{db}\"\n\
         [engine]\npoll_interval = \"20ms\"\nrescue_interval = \"100ms\"\ngrace = \"1s\"\n\
         leader_lease = \"{}ms\"\nleader_renew = \"{}ms\"\n",
        LEADER_LEASE.as_millis(),
        LEADER_RENEW.as_millis()
    );
    for (kind, path) in [("multi.fast", "/fast"), ("multi.slow", "/slow")] {
        c += &format!(
            "[kinds.\"{kind}\"]\nurl = \"{base}{path}\"\nsecret = \"{SECRET}\"\nmax_attempts = 20\n\
             backoff = {{ schedule = [\"50ms\"] }}\ntimeout = \"5s\"\nconcurrency = 8\nlease = \"2s\"\n"
        );
    }
    c
}

fn request(kind: &str, i: usize) -> EnqueueRequest {
    EnqueueRequest {
        kind: kind.into(),
        key: format!("order-{i}"),
        payload: format!(r#"{{"order":{i}}}"#).into_bytes(),
        ..Default::default()
    }
}

async fn enqueue(producer: &Engine, kind: &str, n: usize) -> Vec<TaskId> {
    producer
        .enqueue_many((0..n).map(|i| request(kind, i)).collect())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.unwrap().id)
        .collect()
}

async fn wait_succeeded(store: &Arc<dyn Store>, kind: &str, n: usize) {
    wait_for(Duration::from_secs(60), "every task to succeed", || {
        let store = store.clone();
        async move {
            let c = store
                .counts(CountsParams {
                    kind: Some(kind.to_string()),
                })
                .await
                .unwrap();
            (c.succeeded as usize == n).then_some(())
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_split_the_work_and_leadership_moves_when_the_leader_dies() {
    let Some(schema) = TestDb::new(Server::Postgres) else {
        return;
    };
    let target = TestTarget::start(Arc::new(|path, _| match path {
        "/fast" => (200, Some(Duration::from_millis(10)), vec![]),
        _ => (200, Some(Duration::from_millis(400)), vec![]),
    }))
    .await;
    let db = schema.url();
    let store = backstop::open_store(&db).await.unwrap();
    let mut producer = Engine::builder(store.clone());
    for kind in ["multi.fast", "multi.slow"] {
        let mut k = KindConfig::new(
            kind,
            Target::HttpPush {
                url: format!("{}/unused", target.base),
                secret: None,
            },
        );
        k.max_attempts = 20;
        producer = producer.kind(k);
    }
    let producer = producer.build().unwrap();

    let dirs: Vec<Workdir> = (0..PROCESSES)
        .map(|_| Workdir::new(&config(&target.base, &db)))
        .collect();
    let mut serves: Vec<_> = dirs.iter().map(|w| Some(w.serve())).collect();
    for w in &dirs {
        w.wait_started(1).await;
    }
    let workers: Vec<String> = dirs
        .iter()
        .map(|w| logged(&w.serve_log(), "engine started", "worker").expect("worker id"))
        .collect();
    let leader = wait_for(Duration::from_secs(10), "a leader", || async {
        let leaders: Vec<usize> = (0..PROCESSES)
            .filter(|i| dirs[*i].serve_log().contains("became leader"))
            .collect();
        assert!(leaders.len() <= 1, "one leader: {leaders:?}");
        leaders.first().copied()
    })
    .await;

    // Each process shows whether it leads.
    for (i, w) in dirs.iter().enumerate() {
        let metrics = format!("{}/metrics", w.api_base().await);
        let want = format!(
            "backstop_leader{{name=\"singletons\"}} {}",
            u8::from(i == leader)
        );
        wait_for(Duration::from_secs(5), "the leader gauge", || async {
            let text = reqwest::get(&metrics).await.ok()?.text().await.ok()?;
            text.lines().any(|l| l == want).then_some(())
        })
        .await;
    }

    // 1. No kill: the processes split the work, and each task is delivered once.
    let fast = enqueue(&producer, "multi.fast", FAST_TASKS).await;
    wait_succeeded(&store, "multi.fast", FAST_TASKS).await;
    let mut per_worker: HashMap<String, usize> = HashMap::new();
    for id in &fast {
        let task = store.get(GetParams { id: *id }).await.unwrap().unwrap();
        assert_eq!((task.status, task.attempts), (Status::Succeeded, 1), "{id}");
        let events = store.timeline(TimelineParams { id: *id }).await.unwrap();
        let attempts: Vec<_> = events
            .iter()
            .filter(|e| e.kind == EventType::Attempt)
            .collect();
        assert_eq!(attempts.len(), 1, "{id}: one attempt: {events:?}");
        assert!(
            events
                .iter()
                .all(|e| matches!(e.kind, EventType::Created | EventType::Attempt)),
            "{id}: no rescue or stale completion: {events:?}"
        );
        let worker = attempts[0]
            .worker
            .clone()
            .expect("the attempt names its worker");
        *per_worker.entry(worker).or_default() += 1;
    }
    println!("work per process: {per_worker:?}");
    assert_eq!(
        per_worker.len(),
        PROCESSES,
        "every process took a share of the work: {per_worker:?}"
    );
    assert!(per_worker.keys().all(|w| workers.contains(w)));
    let deliveries = target.deliveries();
    let ids: HashSet<&str> = deliveries.iter().map(|d| d.header("webhook-id")).collect();
    assert_eq!(
        (deliveries.len(), ids.len()),
        (FAST_TASKS, FAST_TASKS),
        "every task delivered exactly once"
    );

    // 2. SIGKILL the leader while it holds slow deliveries.
    let slow = enqueue(&producer, "multi.slow", SLOW_TASKS).await;
    let dead = workers[leader].clone();
    let held_by = |owner: String| {
        let store = store.clone();
        async move {
            let running = store
                .list(ListParams {
                    kind: Some("multi.slow".into()),
                    status: Some(Status::Running),
                    limit: 1000,
                    ..Default::default()
                })
                .await
                .unwrap();
            running
                .into_iter()
                .filter(|t| t.lease_owner.as_deref() == Some(owner.as_str()))
                .map(|t| t.id)
                .collect::<Vec<_>>()
        }
    };
    wait_for(Duration::from_secs(10), "the leader to hold work", || {
        let held = held_by(dead.clone());
        async move { (!held.await.is_empty()).then_some(()) }
    })
    .await;
    let mut killed = serves[leader].take().unwrap();
    signal(&killed, libc::SIGKILL);
    let killed_at = Instant::now();
    assert!(!killed.wait().await.unwrap().success());
    let stranded = held_by(dead.clone()).await;
    assert!(!stranded.is_empty(), "the kill stranded leased tasks");

    let successor = wait_for(Duration::from_secs(10), "another leader", || async {
        (0..PROCESSES)
            .filter(|i| *i != leader)
            .find(|i| dirs[*i].serve_log().contains("became leader"))
    })
    .await;
    let took = killed_at.elapsed();
    println!("process {successor} led {took:?} after the leader was killed");
    assert!(
        took <= LEADER_LEASE + LEADER_RENEW + Duration::from_secs(2),
        "leadership moves within seconds: {took:?}"
    );

    wait_succeeded(&store, "multi.slow", SLOW_TASKS).await;
    for id in &stranded {
        let events = store.timeline(TimelineParams { id: *id }).await.unwrap();
        assert!(
            events
                .iter()
                .any(|e| e.outcome == Some(AttemptOutcome::LeaseExpired)
                    && e.worker.as_deref() == Some(dead.as_str())),
            "{id}: rescued from the dead leader: {events:?}"
        );
    }
    assert!(
        dirs[successor]
            .serve_log()
            .contains("rescued a task whose lease expired"),
        "the new leader rescued the stranded tasks"
    );
    let slow_ids: HashSet<String> = slow.iter().map(|id| id.to_string()).collect();
    let stranded_ids: HashSet<String> = stranded.iter().map(|id| id.to_string()).collect();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for d in target.deliveries().iter().skip(FAST_TASKS) {
        *seen.entry(d.header("webhook-id").to_string()).or_default() += 1;
    }
    for id in &slow_ids {
        let n = seen.get(id).copied().unwrap_or(0);
        assert!(n >= 1, "{id} was delivered");
        assert!(
            n == 1 || stranded_ids.contains(id),
            "{id}: delivered {n} times but not stranded by the kill"
        );
    }

    for s in serves.iter_mut().flatten() {
        signal(s, libc::SIGTERM);
    }
    for s in serves.iter_mut().flatten() {
        assert!(s.wait().await.unwrap().success());
    }
}
