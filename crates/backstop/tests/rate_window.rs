//! A rate limit per key is shared by every process: three `backstop serve` processes on one
//! PostgreSQL schema (and on one MariaDB prefix) deliver two tenants' backlogs under
//! `limits.rate = { key = "/tenant", limit = 10, period = "1s", burst = 2 }` for 60 s. The
//! target notes when each request arrives: no 1-second window holds more than 12 of one
//! tenant's (its burst of 2 plus 10) beyond two intervals of delivery delay, each tenant
//! still gets most of its rate, and the ledger
//! shows throttled tasks pending with no attempt spent and a `rate_limited` event.
//!
//! Needs `BACKSTOP_TEST_POSTGRES_URL` / `BACKSTOP_TEST_MYSQL_URL`; without them the test says
//! `skipped:` and passes.

mod common;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use backstop::{Engine, EnqueueRequest, KindConfig, Target};
use backstop_core::store::{CountsParams, GetByKeyParams, TimelineParams};
use backstop_core::{EventType, Status};
use common::db::{Server, TestDb};
use common::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KIND: &str = "tenant.sync";
const TENANTS: [&str; 2] = ["hot", "warm"];
/// More than 60 s can start at 10 per second, so every tenant stays throttled throughout.
const PER_TENANT: usize = 800;
const RUN: Duration = Duration::from_secs(60);
const LIMIT: usize = 10;
const BURST: usize = 2;
/// Intervals of the rate (100 ms each) a start's request may be delayed on its way out.
const JITTER_INTERVALS: usize = 2;

type Arrivals = Arc<Mutex<HashMap<String, Vec<Instant>>>>;

async fn hook(State(a): State<Arrivals>, body: Bytes) -> StatusCode {
    let at = Instant::now();
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let tenant = v["tenant"].as_str().unwrap().to_string();
    a.lock().unwrap().entry(tenant).or_default().push(at);
    StatusCode::OK
}

fn config(base: &str, db: &str) -> String {
    format!(
        "database = \"{db}\"\n\
         [kinds.\"{KIND}\"]\nurl = \"{base}/hook\"\nconcurrency = 8\n\
         limits.rate = {{ key = \"/tenant\", limit = {LIMIT}, period = \"1s\", burst = {BURST} }}\n"
    )
}

/// The most arrivals in any closed window of one second.
fn busiest_second(arrivals: &[Instant]) -> usize {
    let mut a = arrivals.to_vec();
    a.sort();
    (0..a.len())
        .map(|i| {
            a[i..]
                .iter()
                .take_while(|t| **t - a[i] <= Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// One store's run at a time: the windows are measured where requests arrive, so three more
/// processes and another database on the same two cores would add their delays between a
/// claim's decision and its request's arrival (a CI run with both at once saw 13 in a second).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn three_processes_share_one_rate(server: Server) {
    let Some(test_db) = TestDb::new(server) else {
        return;
    };
    let _turn = ONE_AT_A_TIME.lock().await;
    let arrivals: Arrivals = Arc::default();
    let app = Router::new()
        .route("/hook", post(hook))
        .with_state(arrivals.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let w = Workdir::new(&config(&base, &test_db.url()));
    let store = backstop::open_store(&test_db.url()).await.unwrap();
    let kind = KindConfig::new(
        KIND,
        Target::HttpPush {
            url: format!("{base}/hook"),
            secret: None,
        },
    );
    let producer = Engine::builder(store.clone()).kind(kind).build().unwrap();
    let mut tasks = Vec::new();
    for i in 0..PER_TENANT {
        for t in TENANTS {
            tasks.push(EnqueueRequest {
                kind: KIND.into(),
                key: format!("{t}-{i}"),
                payload: format!(r#"{{"tenant":"{t}","n":{i}}}"#).into_bytes(),
                ..Default::default()
            });
        }
    }
    producer.enqueue_many(tasks).await.unwrap();

    let mut serves: Vec<_> = (0..3).map(|_| w.serve()).collect();
    w.wait_started(3).await;
    tokio::time::sleep(RUN).await;
    for s in &serves {
        signal(s, libc::SIGTERM);
    }
    for s in &mut serves {
        assert!(s.wait().await.unwrap().success(), "{}", w.serve_log());
    }

    let arrivals = arrivals.lock().unwrap().clone();
    for t in TENANTS {
        let a = arrivals.get(t).cloned().unwrap_or_default();
        let busiest = busiest_second(&a);
        eprintln!(
            "{server:?} {t}: {} starts in {} s, at most {busiest} in one second",
            a.len(),
            RUN.as_secs()
        );
        // The claims decide at most BURST + LIMIT starts in any second; the target sees them
        // after each process's own delay between a start and its request, which on a loaded
        // machine bunches arrivals: quiet runs saw 12, CI runs 13. Two intervals of that
        // delay are allowed; sharing no rate would show about three times LIMIT.
        assert!(
            busiest <= BURST + LIMIT + JITTER_INTERVALS,
            "{t}: {busiest} starts arrived in one second, more than the burst of {BURST} plus {LIMIT} (and {JITTER_INTERVALS} for delivery delays)"
        );
        // The rate is met, not only respected: a look only every poll would start about a
        // burst per poll (8 a second), and no sharing would start three times the rate.
        assert!(
            a.len() >= RUN.as_secs() as usize * LIMIT * 8 / 10,
            "{t}: only {} starts in {} s at {LIMIT} a second",
            a.len(),
            RUN.as_secs()
        );
    }
    let c = store
        .counts(CountsParams {
            kind: Some(KIND.into()),
        })
        .await
        .unwrap();
    assert_eq!(c.failed, 0, "the limit never fails a task");
    assert_eq!(c.total() as usize, PER_TENANT * TENANTS.len());
    let delivered: usize = arrivals.values().map(Vec::len).sum();
    assert_eq!(c.succeeded as usize, delivered, "each start delivered once");
    // The last of a tenant's tasks waits: pending, no attempt spent, and told why.
    for t in TENANTS {
        let last = store
            .get_by_key(GetByKeyParams {
                kind: KIND.into(),
                key: format!("{t}-{}", PER_TENANT - 1),
            })
            .await
            .unwrap()
            .expect("the task");
        assert_eq!((last.status, last.attempts), (Status::Pending, 0));
        let timeline = store
            .timeline(TimelineParams { id: last.id })
            .await
            .unwrap();
        assert!(
            timeline.iter().any(|e| e.kind == EventType::RateLimited),
            "{t}: a waiting task says it is rate limited: {timeline:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_postgres_share_one_rate_per_key() {
    three_processes_share_one_rate(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_mariadb_share_one_rate_per_key() {
    three_processes_share_one_rate(Server::Mysql).await;
}
