//! A limit per target host holds across kinds and processes: two push kinds post to one
//! loopback host limited to 3 attempts at once (`[hosts."127.0.0.1:PORT"] concurrency = 3`),
//! each kind allowing 8 at once in each of two `backstop serve` processes on one SQLite
//! ledger. The target holds every request a while and notes how many are in flight across both
//! paths: never more than 3, the 3 are used, both kinds get through, and every task succeeds.

mod common;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use backstop::{Engine, EnqueueRequest, KindConfig, Target};
use backstop_core::store::CountsParams;
use common::*;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const KINDS: [&str; 2] = ["stock.sync", "order.ship"];
const PER_KIND: usize = 40;
const MAX: usize = 3;
const HOLD: Duration = Duration::from_millis(150);

/// Requests in flight now, the most at once, and the kinds seen in flight together.
#[derive(Default)]
struct Seen {
    in_flight: Vec<String>,
    most: usize,
    overlapped: HashSet<String>,
    requests: usize,
}

type Shared = Arc<Mutex<Seen>>;

async fn hook(State((s, kind)): State<(Shared, String)>) -> StatusCode {
    {
        let mut s = s.lock().unwrap();
        s.in_flight.push(kind.clone());
        s.most = s.most.max(s.in_flight.len());
        s.requests += 1;
        let kinds: HashSet<String> = s.in_flight.iter().cloned().collect();
        if kinds.len() > 1 {
            s.overlapped.extend(kinds);
        }
    }
    tokio::time::sleep(HOLD).await;
    let mut s = s.lock().unwrap();
    let at = s.in_flight.iter().position(|k| *k == kind).unwrap();
    s.in_flight.remove(at);
    StatusCode::OK
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_on_one_host_share_its_limit_across_processes() {
    let seen: Shared = Arc::default();
    let mut app = Router::new();
    for k in KINDS {
        app = app.route(
            &format!("/{k}"),
            post(hook).with_state((seen.clone(), k.to_string())),
        );
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let base = format!("http://{host}");
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut config = String::new();
    for k in KINDS {
        config.push_str(&format!(
            "[kinds.\"{k}\"]\nurl = \"{base}/{k}\"\nconcurrency = 8\n"
        ));
    }
    config.push_str(&format!("[hosts.\"{host}\"]\nconcurrency = {MAX}\n"));
    let w = Workdir::new(&config);
    let store = backstop::open_store(&w.db_url()).await.unwrap();
    let mut producer = Engine::builder(store.clone());
    for k in KINDS {
        producer = producer.kind(KindConfig::new(
            k,
            Target::HttpPush {
                url: format!("{base}/{k}"),
                secret: None,
            },
        ));
    }
    let producer = producer.build().unwrap();
    let tasks = (0..PER_KIND)
        .flat_map(|i| {
            KINDS.map(|k| EnqueueRequest {
                kind: k.into(),
                key: format!("{k}-{i}"),
                payload: b"{}".to_vec(),
                ..Default::default()
            })
        })
        .collect();
    producer.enqueue_many(tasks).await.unwrap();

    let mut serves: Vec<_> = (0..2).map(|_| w.serve()).collect();
    w.wait_started(2).await;
    let total = PER_KIND * KINDS.len();
    wait_for(Duration::from_secs(60), "every task to succeed", || {
        let store = store.clone();
        async move {
            let c = store.counts(CountsParams::default()).await.unwrap();
            (c.succeeded as usize == total).then_some(())
        }
    })
    .await;
    for s in &serves {
        signal(s, libc::SIGTERM);
    }
    for s in &mut serves {
        assert!(s.wait().await.unwrap().success(), "{}", w.serve_log());
    }
    let s = seen.lock().unwrap();
    eprintln!(
        "{} requests, at most {} in flight at once",
        s.requests, s.most
    );
    assert!(
        s.most <= MAX,
        "{} requests in flight at once on a host limited to {MAX}",
        s.most
    );
    assert_eq!(s.most, MAX, "the host's slots are used, not only respected");
    assert_eq!(
        s.overlapped.len(),
        KINDS.len(),
        "both kinds run side by side within the host's limit"
    );
    assert_eq!(s.requests, total, "each task delivered once");
}
