//! Crash test: `backstop serve` is killed with SIGKILL at random moments at least ten times
//! while 1,000 tasks are delivered (half enqueued before, half during the run), restarted
//! each time, and in the end every acknowledged task has succeeded, none is lost, and every
//! duplicate delivery carried the same idempotency key.

mod common;

use backstop::{Engine, EnqueueRequest, KindConfig, Target};
use backstop_core::store::CountsParams;
use common::*;
use rand::Rng;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

const TASKS: usize = 1000;
const KILLS: usize = 12;

fn config(base: &str, db: &str) -> String {
    format!(
        "database = \"{db}\"\n\
         [engine]\npoll_interval = \"20ms\"\nrescue_interval = \"100ms\"\ngrace = \"1s\"\n\
         [kinds.\"crash.sink\"]\nurl = \"{base}/sink\"\nsecret = \"{SECRET}\"\nmax_attempts = 50\n\
         backoff = {{ schedule = [\"50ms\"] }}\ntimeout = \"500ms\"\nconcurrency = 8\nlease = \"1s\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_moments_loses_nothing() {
    // The target answers after a few milliseconds, so kills land mid-delivery.
    let target = TestTarget::start(Arc::new(|_, _| {
        let ms = rand::rng().random_range(5..30);
        (200, Some(Duration::from_millis(ms)), vec![])
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("backstop.db").display());
    let w = Workdir::new(&config(&target.base, &db));

    // This test enqueues through the library, into the same file, as an application would.
    let store = backstop::open_store(&db).await.unwrap();
    let mut kind = KindConfig::new(
        "crash.sink",
        Target::HttpPush {
            url: format!("{}/sink", target.base),
            secret: None,
        },
    );
    kind.max_attempts = 50;
    let producer = Engine::builder(store.clone()).kind(kind).build().unwrap();
    let request = |i: usize| EnqueueRequest {
        kind: "crash.sink".into(),
        key: format!("order-{i}"),
        payload: format!(r#"{{"order":{i}}}"#).into_bytes(),
        ..Default::default()
    };
    let mut acknowledged: HashMap<String, String> = HashMap::new();
    let first: Vec<_> = (0..TASKS / 2).map(request).collect();
    for (i, r) in producer
        .enqueue_many(first)
        .await
        .unwrap()
        .into_iter()
        .enumerate()
    {
        acknowledged.insert(format!("order-{i}"), r.unwrap().id.to_string());
    }

    let mut next = TASKS / 2;
    for round in 0..KILLS {
        let mut serve = w.serve();
        // Enqueue a slice of the rest while this process runs.
        let until = (next + TASKS / 2 / KILLS + 1).min(TASKS);
        let batch: Vec<_> = (next..until).map(request).collect();
        for (i, r) in producer
            .enqueue_many(batch)
            .await
            .unwrap()
            .into_iter()
            .enumerate()
        {
            acknowledged.insert(format!("order-{}", next + i), r.unwrap().id.to_string());
        }
        next = until;
        // Kill while deliveries are flowing (on a fast machine a fixed pause could land when
        // all the work is already done): wait for a few new deliveries, then a random moment.
        let flowing = target.count() + 3;
        let give_up = tokio::time::Instant::now() + Duration::from_secs(3);
        while target.count() < flowing && tokio::time::Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let pause = rand::rng().random_range(0..120);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        signal(&serve, libc::SIGKILL);
        let status = serve.wait().await.unwrap();
        assert!(!status.success(), "round {round}: the process was killed");
    }
    let rest: Vec<_> = (next..TASKS).map(request).collect();
    for (i, r) in producer
        .enqueue_many(rest)
        .await
        .unwrap()
        .into_iter()
        .enumerate()
    {
        acknowledged.insert(format!("order-{}", next + i), r.unwrap().id.to_string());
    }
    assert_eq!(acknowledged.len(), TASKS);

    // A last process finishes the work, including what the kills stranded.
    let started_before = w.serve_log().matches("engine started").count();
    let mut serve = w.serve();
    w.wait_started(started_before + 1).await;
    let store2 = store.clone();
    wait_for(Duration::from_secs(90), "every task to succeed", || {
        let store = store2.clone();
        async move {
            let c = store
                .counts(CountsParams {
                    kind: Some("crash.sink".into()),
                })
                .await
                .unwrap();
            (c.succeeded as usize == TASKS).then_some(())
        }
    })
    .await;
    signal(&serve, libc::SIGTERM);
    assert!(serve.wait().await.unwrap().success());

    let counts = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(
        counts.total() as usize,
        TASKS,
        "nothing lost, nothing invented"
    );
    assert_eq!(counts.succeeded as usize, TASKS);
    let deliveries = target.deliveries();
    let mut keys_seen: HashMap<String, HashSet<String>> = HashMap::new();
    for d in &deliveries {
        keys_seen
            .entry(d.header("backstop-key").to_string())
            .or_default()
            .insert(d.header("idempotency-key").to_string());
    }
    for (key, id) in &acknowledged {
        let seen = keys_seen
            .get(key)
            .unwrap_or_else(|| panic!("{key} was never delivered"));
        assert_eq!(
            seen.len(),
            1,
            "{key}: every delivery carries one idempotency key"
        );
        assert!(
            seen.contains(id),
            "{key}: the idempotency key is the task id"
        );
    }
    let duplicates = deliveries.len() - TASKS;
    println!(
        "{} deliveries for {TASKS} tasks ({duplicates} repeated after kills), {KILLS} kills",
        deliveries.len()
    );
    assert!(
        w.serve_log().contains("rescued a task whose lease expired"),
        "the kills stranded leases that were rescued"
    );
}
