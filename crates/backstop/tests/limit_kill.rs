//! Slots of a concurrency limit cannot leak: `backstop serve` is SIGKILLed 100 times, each
//! time while it holds slots of a kind limited to 2 attempts per tenant (the target holds every
//! request, so no attempt ends by itself), and restarted. Each new process finds the slots of
//! the one before it taken until their leases lapse, takes them then, and never runs more than
//! 2 of a tenant itself. In the end a last process, with a target that answers at once, runs 2
//! of each tenant at a time again (no slot was lost to the kills) and every task succeeds.

mod common;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use backstop::{Engine, EnqueueRequest, KindConfig, Target};
use backstop_core::limit::ConcurrencyLimit;
use backstop_core::store::CountsParams;
use common::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KIND: &str = "tenant.sync";
const TENANTS: usize = 4;
const MAX: usize = 2;
const TASKS: usize = 200;
const KILLS: usize = 100;

/// What the target has seen: requests in flight per (process generation, tenant), the most
/// each generation had of one tenant, and the most of one tenant once the target answers at
/// once.
#[derive(Default)]
struct Seen {
    in_flight: HashMap<(usize, String), usize>,
    most_per_process: usize,
    most_at_the_end: HashMap<String, usize>,
}

#[derive(Clone, Default)]
struct Hook {
    seen: Arc<Mutex<Seen>>,
    /// The generation of the process now running (only one runs at a time).
    generation: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    /// Hold every request (until the connection goes) rather than answer.
    hold: Arc<AtomicBool>,
}

/// Leaves the request's place in flight however the handler ends: answered, or dropped when
/// its connection closed.
struct Flight(Hook, (usize, String));

impl Drop for Flight {
    fn drop(&mut self) {
        let mut s = self.0.seen.lock().unwrap();
        if let Some(n) = s.in_flight.get_mut(&self.1) {
            *n -= 1;
        }
    }
}

async fn hook(State(h): State<Hook>, body: Bytes) -> StatusCode {
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let tenant = v["tenant"].as_str().unwrap().to_string();
    let at = (h.generation.load(Ordering::SeqCst), tenant.clone());
    let hold = h.hold.load(Ordering::SeqCst);
    {
        let mut s = h.seen.lock().unwrap();
        let n = s.in_flight.entry(at.clone()).or_default();
        *n += 1;
        let n = *n;
        s.most_per_process = s.most_per_process.max(n);
        if !hold {
            let m = s.most_at_the_end.entry(tenant).or_default();
            *m = (*m).max(n);
        }
    }
    let _flight = Flight(h.clone(), at);
    h.requests.fetch_add(1, Ordering::SeqCst);
    if hold {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    StatusCode::OK
}

fn config(base: &str, db: &str) -> String {
    format!(
        "database = \"{db}\"\n\
         [engine]\npoll_interval = \"20ms\"\nrescue_interval = \"100ms\"\ngrace = \"1s\"\n\
         [kinds.\"{KIND}\"]\nurl = \"{base}/hook\"\nmax_attempts = 1000\n\
         backoff = {{ schedule = [\"20ms\"] }}\ntimeout = \"1h\"\nconcurrency = 16\nlease = \"1s\"\n\
         limits.concurrency = {{ key = \"/tenant\", max = {MAX} }}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_sigkills_of_slot_holders_leak_no_slot() {
    let h = Hook::default();
    h.hold.store(true, Ordering::SeqCst);
    let app = Router::new()
        .route("/hook", post(hook))
        .with_state(h.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("backstop.db").display());
    let w = Workdir::new(&config(&base, &db));
    let store = backstop::open_store(&db).await.unwrap();
    let mut kind = KindConfig::new(
        KIND,
        Target::HttpPush {
            url: format!("{base}/hook"),
            secret: None,
        },
    );
    kind.concurrency_limit = Some(ConcurrencyLimit {
        key: "/tenant".into(),
        max: MAX as u32,
        missing_key: Default::default(),
    });
    let producer = Engine::builder(store.clone()).kind(kind).build().unwrap();
    let requests = (0..TASKS)
        .map(|i| EnqueueRequest {
            kind: KIND.into(),
            key: format!("t-{i}"),
            payload: format!(r#"{{"tenant":"tenant-{}","n":{i}}}"#, i % TENANTS).into_bytes(),
            ..Default::default()
        })
        .collect();
    producer.enqueue_many(requests).await.unwrap();

    let began = Instant::now();
    for round in 1..=KILLS {
        h.generation.store(round, Ordering::SeqCst);
        let before = h.requests.load(Ordering::SeqCst);
        let mut serve = w.serve();
        // This process takes a slot only once a lease of the one before it has lapsed.
        wait_for(
            Duration::from_secs(20),
            "the process to take a slot",
            || {
                let h = h.clone();
                async move { (h.requests.load(Ordering::SeqCst) > before).then_some(()) }
            },
        )
        .await;
        signal(&serve, libc::SIGKILL);
        assert!(
            !serve.wait().await.unwrap().success(),
            "round {round}: killed"
        );
    }
    let killing = began.elapsed();
    assert!(
        h.seen.lock().unwrap().most_per_process <= MAX,
        "a process ran more than {MAX} of one tenant at once"
    );

    // A last process with a target that answers: every slot is there to take.
    h.generation.store(KILLS + 1, Ordering::SeqCst);
    h.hold.store(false, Ordering::SeqCst);
    let mut serve = w.serve();
    let store2 = store.clone();
    wait_for(Duration::from_secs(120), "every task to succeed", || {
        let store = store2.clone();
        async move {
            let c = store
                .counts(CountsParams {
                    kind: Some(KIND.into()),
                })
                .await
                .unwrap();
            (c.succeeded as usize == TASKS).then_some(())
        }
    })
    .await;
    signal(&serve, libc::SIGTERM);
    assert!(serve.wait().await.unwrap().success());
    ran_max_of_each_tenant_again(&h.seen);
    let c = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(c.total() as usize, TASKS, "nothing lost, nothing invented");
    eprintln!(
        "{KILLS} kills of slot holders in {:.1} s; then {TASKS} tasks drained",
        killing.as_secs_f64()
    );
}

/// The last process ran `MAX` of each tenant at once, and no process ever ran more.
fn ran_max_of_each_tenant_again(seen: &Mutex<Seen>) {
    let s = seen.lock().unwrap();
    assert!(
        s.most_per_process <= MAX,
        "at most {MAX} of a tenant at once"
    );
    for t in 0..TENANTS {
        let tenant = format!("tenant-{t}");
        assert_eq!(
            s.most_at_the_end.get(&tenant),
            Some(&MAX),
            "{tenant} ran {MAX} at a time again after {KILLS} kills: {:?}",
            s.most_at_the_end
        );
    }
}
