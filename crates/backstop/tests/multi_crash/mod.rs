//! The multi-process crash test, shared by the PostgreSQL and MySQL/MariaDB variants: three
//! `backstop serve` processes on one database deliver 10,000 HTTP-push tasks (half enqueued
//! before they start, half while they run); one of them (not the leader) is SIGKILLed while
//! deliveries flow. In the end, exactly as in the single-process crash test: every task has
//! succeeded, none is lost or invented, every delivery of a task carried its one idempotency
//! key (the task id); and, because three processes share the work: nothing was delivered twice
//! before the kill, whatever was delivered twice was held by the killed process, and the
//! leader rescued each of those leases.
//!
//! The ordered variant spreads the tasks over 100 ordering groups and fails one delivery in
//! ten with a 500, so tasks retry while the kill lands; then, besides all of the above, the
//! target saw each group's tasks in exactly their ledger order (their `group_seq`, which is
//! also the order the producer enqueued them in): no delivery of a task before the last
//! delivery of the task before it in its group.

use crate::common::db::{Server, TestDb};
use crate::common::*;
use backstop::{Engine, EnqueueRequest, EventType, KindConfig, Status, Store, Target, TaskId};
use backstop_core::AttemptOutcome;
use backstop_core::group::Ordering;
use backstop_core::store::CountsParams;
use backstop_core::store::ListParams;
use backstop_core::store::TimelineParams;
use rand::Rng;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KIND: &str = "multi.crash";
const TASKS: usize = 10_000;
const PROCESSES: usize = 3;
/// Enqueued in batches of this many.
const BATCH: usize = 500;
/// The kill comes once this many deliveries have been made.
const KILL_AFTER: usize = TASKS / 3;
/// The kind's lease: a killed process's tasks are rescued about this long after the kill.
const LEASE: Duration = Duration::from_secs(3);

/// What the run varies.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    /// Ordering groups the tasks are spread over (task i in group i mod N); 0: none.
    pub groups: usize,
    /// One delivery in this many answers 500 (0: none does).
    pub fail_one_in: u32,
}

impl Scenario {
    /// Unordered tasks and a target that never fails.
    pub const PLAIN: Scenario = Scenario {
        groups: 0,
        fail_one_in: 0,
    };
    /// 100 groups of 100 tasks, one delivery in ten failing.
    pub const ORDERED: Scenario = Scenario {
        groups: 100,
        fail_one_in: 10,
    };
}

fn config(base: &str, db: &str, s: Scenario) -> String {
    let ordering = if s.groups > 0 {
        "ordering = { group = \"/group\" }\n"
    } else {
        ""
    };
    format!(
        "database = \"{db}\"\n\
         [engine]\npoll_interval = \"20ms\"\nrescue_interval = \"200ms\"\ngrace = \"1s\"\n\
         leader_lease = \"3s\"\nleader_renew = \"300ms\"\n\
         [kinds.\"{KIND}\"]\nurl = \"{base}/sink\"\nsecret = \"{SECRET}\"\nmax_attempts = 50\n\
         backoff = {{ schedule = [\"50ms\"] }}\ntimeout = \"2s\"\nconcurrency = 16\n\
         lease = \"{}ms\"\n{ordering}",
        LEASE.as_millis()
    )
}

fn request(i: usize, s: Scenario) -> EnqueueRequest {
    let payload = if s.groups > 0 {
        format!(r#"{{"order":{i},"group":"g{}"}}"#, i % s.groups)
    } else {
        format!(r#"{{"order":{i}}}"#)
    };
    EnqueueRequest {
        kind: KIND.into(),
        key: format!("order-{i}"),
        payload: payload.into_bytes(),
        ..Default::default()
    }
}

/// Enqueues tasks `from..to` in batches; returns key → task id.
async fn enqueue(
    producer: &Engine,
    from: usize,
    to: usize,
    s: Scenario,
) -> HashMap<String, String> {
    let mut ids = HashMap::new();
    let mut next = from;
    while next < to {
        let end = (next + BATCH).min(to);
        let results = producer
            .enqueue_many((next..end).map(|i| request(i, s)).collect())
            .await
            .unwrap();
        for (i, r) in results.into_iter().enumerate() {
            ids.insert(format!("order-{}", next + i), r.unwrap().id.to_string());
        }
        next = end;
    }
    ids
}

/// The tasks `owner` holds leases on.
async fn held_by(store: &Arc<dyn Store>, owner: &str) -> Vec<TaskId> {
    store
        .list(ListParams {
            kind: Some(KIND.into()),
            status: Some(Status::Running),
            limit: 10_000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.lease_owner.as_deref() == Some(owner))
        .map(|t| t.id)
        .collect()
}

/// The scenarios of one server run one after the other: two sets of three processes at once
/// on a two-core machine would starve leases into expiring, which this test counts as a fault.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub async fn sigkill_one_of_three_loses_nothing(server: Server, scenario: Scenario) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(db) = TestDb::new(server) else {
        return;
    };
    let began = Instant::now();
    // The target answers after a few milliseconds, so the kill lands mid-delivery.
    // In the ordered scenario, one delivery in `fail_one_in` fails with a 500 and is retried.
    let target = TestTarget::start(Arc::new(move |_, _| {
        let mut rng = rand::rng();
        let ms = rng.random_range(2..12);
        let n = scenario.fail_one_in;
        let status = if n > 0 && rng.random_range(0..n) == 0 {
            500
        } else {
            200
        };
        (status, Some(Duration::from_millis(ms)), vec![])
    }))
    .await;
    let url = db.url();
    println!("database: {url}");
    let store = backstop::open_store(&url).await.unwrap();
    // The test enqueues through the library, as an application would.
    let mut kind = KindConfig::new(
        KIND,
        Target::HttpPush {
            url: format!("{}/sink", target.base),
            secret: None,
        },
    );
    kind.max_attempts = 50;
    if scenario.groups > 0 {
        kind.ordering = Some(Ordering {
            group: Some("/group".into()),
            ..Default::default()
        });
    }
    let producer = Engine::builder(store.clone()).kind(kind).build().unwrap();
    let mut acknowledged = enqueue(&producer, 0, TASKS / 2, scenario).await;

    let dirs: Vec<Workdir> = (0..PROCESSES)
        .map(|_| Workdir::new(&config(&target.base, &url, scenario)))
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
        (0..PROCESSES).find(|i| dirs[*i].serve_log().contains("became leader"))
    })
    .await;
    let victim = (leader + 1) % PROCESSES;
    let dead = workers[victim].clone();

    // The other half is enqueued while the processes deliver.
    let rest = {
        let producer = producer.clone();
        tokio::spawn(async move { enqueue(&producer, TASKS / 2, TASKS, scenario).await })
    };

    // SIGKILL the victim while deliveries flow and it holds leases.
    wait_for(Duration::from_secs(30), "deliveries to flow", || async {
        (target.count() >= KILL_AFTER).then_some(())
    })
    .await;
    wait_for(Duration::from_secs(10), "the victim to hold work", || {
        let store = store.clone();
        let dead = dead.clone();
        async move { (!held_by(&store, &dead).await.is_empty()).then_some(()) }
    })
    .await;
    let pause = rand::rng().random_range(0..20);
    tokio::time::sleep(Duration::from_millis(pause)).await;
    let mut killed = serves[victim].take().unwrap();
    signal(&killed, libc::SIGKILL);
    assert!(
        !killed.wait().await.unwrap().success(),
        "the process was killed"
    );
    let delivered_before_kill = target.count();
    // A COMMIT the victim sent just before it died may still land on the server: its
    // outcomes are written, not stranded. Read the leases once those have settled, well
    // before they expire.
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Nothing changes a dead process's leases until they expire (LEASE from the kill).
    let stranded: HashSet<String> = held_by(&store, &dead)
        .await
        .into_iter()
        .map(|id| id.to_string())
        .collect();
    assert!(!stranded.is_empty(), "the kill stranded leased tasks");
    acknowledged.extend(rest.await.unwrap());
    assert_eq!(acknowledged.len(), TASKS);

    let store2 = store.clone();
    wait_for(Duration::from_secs(120), "every task to succeed", || {
        let store = store2.clone();
        async move {
            let c = store
                .counts(CountsParams {
                    kind: Some(KIND.to_string()),
                })
                .await
                .unwrap();
            (c.succeeded as usize == TASKS).then_some(())
        }
    })
    .await;
    let drained = began.elapsed();
    for s in serves.iter_mut().flatten() {
        signal(s, libc::SIGTERM);
    }
    for s in serves.iter_mut().flatten() {
        assert!(s.wait().await.unwrap().success());
    }

    // Nothing lost, nothing invented.
    let counts = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(
        counts.total() as usize,
        TASKS,
        "nothing lost, nothing invented"
    );
    assert_eq!(counts.succeeded as usize, TASKS);

    // Every delivery of a task carries its one idempotency key, the task id; every task was
    // delivered; nothing else was.
    let deliveries = target.deliveries();
    let ids: HashSet<&str> = acknowledged.values().map(String::as_str).collect();
    let mut keys_seen: HashMap<&str, HashSet<&str>> = HashMap::new();
    let mut times: HashMap<&str, usize> = HashMap::new();
    for d in &deliveries {
        let id = d.header("idempotency-key");
        assert_eq!(d.header("webhook-id"), id);
        assert!(ids.contains(id), "delivered an unknown task {id}");
        keys_seen
            .entry(d.header("backstop-key"))
            .or_default()
            .insert(id);
        if d.status == 200 {
            *times.entry(id).or_default() += 1;
        }
    }
    for (key, id) in &acknowledged {
        let seen = keys_seen
            .get(key.as_str())
            .unwrap_or_else(|| panic!("{key} was never delivered"));
        assert_eq!(
            seen.len(),
            1,
            "{key}: every delivery carries one idempotency key"
        );
        assert!(
            seen.contains(id.as_str()),
            "{key}: the idempotency key is the task id"
        );
    }

    // Duplicates only after the kill, and only of what the killed process held: a task the
    // target accepted twice (a 500 is not a delivery that took; its retry is the point).
    let mut before: HashSet<&str> = HashSet::new();
    for d in deliveries[..delivered_before_kill]
        .iter()
        .filter(|d| d.status == 200)
    {
        let id = d.header("idempotency-key");
        if !before.insert(id) {
            let events = store
                .timeline(TimelineParams {
                    id: id.parse().unwrap(),
                })
                .await
                .unwrap();
            let mine: Vec<_> = deliveries
                .iter()
                .enumerate()
                .filter(|(_, d)| d.header("idempotency-key") == id)
                .map(|(i, d)| (i, d.status, d.headers.clone()))
                .collect();
            panic!(
                "{id} was delivered twice before the kill: deliveries {mine:?}; timeline {events:#?}"
            );
        }
    }
    let repeated: Vec<&str> = times
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| *id)
        .collect();
    for id in &repeated {
        assert!(
            stranded.contains(*id),
            "{id}: delivered {} times but not held by the killed process",
            times[id]
        );
    }

    if scenario.groups > 0 {
        assert_group_order(&store, &deliveries, scenario.groups).await;
    }

    // The killed process's leases were rescued, by the leader.
    for id in &stranded {
        let events = store
            .timeline(TimelineParams {
                id: id.parse().unwrap(),
            })
            .await
            .unwrap();
        assert!(
            events.iter().any(|e| e.kind == EventType::Attempt
                && e.outcome == Some(AttemptOutcome::LeaseExpired)
                && e.worker.as_deref() == Some(dead.as_str())),
            "{id}: rescued from the killed process: {events:?}"
        );
    }
    let rescuers: Vec<usize> = (0..PROCESSES)
        .filter(|i| {
            dirs[*i]
                .serve_log()
                .contains("rescued a task whose lease expired")
        })
        .collect();
    assert!(!rescuers.is_empty(), "the stranded leases were rescued");
    for i in &rescuers {
        assert_ne!(*i, victim);
        assert!(
            dirs[*i].serve_log().contains("became leader"),
            "process {i} rescued without leading"
        );
    }

    println!(
        "{server:?} {scenario:?}: {} deliveries for {TASKS} tasks in {drained:?}; killed process {victim} \
         after {delivered_before_kill} deliveries holding {} leases; {} tasks delivered twice",
        deliveries.len(),
        stranded.len(),
        repeated.len()
    );
}

/// Each group's `group_seq` follows the order its tasks were enqueued in (task i before task
/// i + groups), and the target saw no delivery of a task before the last delivery of the
/// task before it in its group.
async fn assert_group_order(store: &Arc<dyn Store>, deliveries: &[Delivery], groups: usize) {
    let mut place: HashMap<String, (String, i64)> = HashMap::new();
    for g in (0..groups).map(|g| format!("g{g}")) {
        let tasks = store
            .list(ListParams {
                kind: Some(KIND.into()),
                group: Some(g.clone()),
                limit: 10_000,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(tasks.len(), TASKS / groups, "{g}: every task in its group");
        let mut by_number: Vec<(usize, i64)> = tasks
            .iter()
            .map(|t| {
                let n = t.key.trim_start_matches("order-").parse().unwrap();
                (n, t.group_seq.expect("a grouped task has a place"))
            })
            .collect();
        by_number.sort_unstable();
        assert!(
            by_number.windows(2).all(|w| w[0].1 < w[1].1),
            "{g}: places follow the enqueue order: {by_number:?}"
        );
        for t in tasks {
            place.insert(t.id.to_string(), (g.clone(), t.group_seq.unwrap()));
        }
    }
    let mut last: HashMap<&str, i64> = HashMap::new();
    for d in deliveries {
        let (g, seq) = &place[d.header("idempotency-key")];
        let prev = last.entry(g.as_str()).or_insert(*seq);
        assert!(
            *seq >= *prev,
            "{g}: the task in place {seq} was delivered after the one in place {prev}"
        );
        *prev = *seq;
    }
}
