//! `backstop bench http`: the HTTP API and push delivery on loopback, in one process on a
//! fresh SQLite file (`synchronous = FULL`), each next to its raw ceiling: the same client
//! and body against a no-op axum handler.
//!
//! 1. raw ceiling: small JSON bodies POSTed to the no-op handler, C at a time;
//! 2. single enqueue: `POST /v1/tasks`, the same client and concurrency;
//! 3. batched enqueue: `POST /v1/tasks/batch`, next to the same batch bodies POSTed raw;
//! 4. push delivery: tasks of an HTTP push kind, signed, delivered by the running engine to
//!    the no-op handler, next to a raw POST of the same payloads at the kind's concurrency;
//!    once with the tasks enqueued while the engine delivers them, once from a backlog
//!    enqueued before an engine for that kind starts (delivery alone).

use super::load::{self, Measured};
use super::place::TempDir;
use super::sink::{self, Loopback, Received};
use crate::cli::HttpBenchArgs;
use crate::commands::print_json;
use anyhow::{Result, bail};
use axum::body::Bytes;
use backstop::{Engine, EnqueueRequest, KindConfig, Store, Target, TaskId, open_store};
use backstop_core::store::CountsParams;
use backstop_core::store::EnqueueParams;
use backstop_core::task::NewTask;
use backstop_server::{AppState, Limits};
use reqwest::StatusCode;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Enqueued over the API and never run: a pull kind has no dispatcher.
const ENQUEUE_KIND: &str = "bench.enqueue";
/// Pushed by the engine to the no-op handler.
const PUSH_KIND: &str = "bench.push";
/// Pushed from a backlog enqueued before its engine starts: delivery alone.
const BACKLOG_KIND: &str = "bench.push.backlog";
/// The push kind's Standard Webhooks secret: every delivery is signed, as in production.
const SECRET: &str = "whsec_YmVuY2gtc2lnbmluZy1zZWNyZXQ=";

#[derive(Serialize)]
struct Report {
    tasks: usize,
    concurrency: usize,
    target_delay_ms: u64,
    batch: usize,
    durability: &'static str,
    push_signing: &'static str,
    raw: Measured,
    single_enqueue: Measured,
    raw_batch: Measured,
    batched_enqueue: Measured,
    raw_push: Measured,
    push_tasks_per_s: f64,
    push_over_raw: f64,
    backlog_push_tasks_per_s: f64,
    backlog_push_over_raw: f64,
}

/// Runs the HTTP bench and prints its report.
pub async fn run(a: HttpBenchArgs) -> Result<()> {
    if a.tasks == 0 || a.batch == 0 || a.concurrency == 0 {
        bail!("--tasks, --batch and --concurrency must be at least 1");
    }
    let dir = TempDir::new("bench-http")?;
    let r = measure(&dir.sqlite_url(), &a).await?;
    if a.json {
        return print_json(&r);
    }
    let line = |name: &str, m: &Measured, per_request: usize| {
        let tasks = match per_request {
            1 => String::new(),
            _ => format!(" = {:.0} tasks/s", m.tasks_per_s),
        };
        println!(
            "{name}: {:.0} requests/s{tasks}  p50 {:.2} ms  p99 {:.2} ms",
            m.requests_per_s, m.p50_ms, m.p99_ms
        );
    };
    println!("tasks: {}", r.tasks);
    println!("concurrency: {}", r.concurrency);
    println!("push target answers after: {} ms", r.target_delay_ms);
    println!("batch: {}", r.batch);
    println!("durability: {}", r.durability);
    println!("push signing: {}", r.push_signing);
    line("raw ceiling (enqueue body)", &r.raw, 1);
    line("single enqueue", &r.single_enqueue, 1);
    line("raw ceiling (batch body)", &r.raw_batch, r.batch);
    line("batched enqueue", &r.batched_enqueue, r.batch);
    line("raw ceiling (push body)", &r.raw_push, 1);
    println!(
        "push delivery, enqueued alongside: {:.0} tasks/s",
        r.push_tasks_per_s
    );
    println!(
        "push delivery, from a backlog: {:.0} tasks/s",
        r.backlog_push_tasks_per_s
    );
    println!(
        "summary: of the raw ceiling, single enqueue {:.0} %, batched enqueue {:.0} %, push delivery {:.0} % enqueued alongside (push/raw {:.2}), {:.0} % from a backlog (push/raw {:.2})",
        100.0 * r.single_enqueue.requests_per_s / r.raw.requests_per_s,
        100.0 * r.batched_enqueue.requests_per_s / r.raw_batch.requests_per_s,
        100.0 * r.push_over_raw,
        r.push_over_raw,
        100.0 * r.backlog_push_over_raw,
        r.backlog_push_over_raw,
    );
    Ok(())
}

async fn measure(url: &str, a: &HttpBenchArgs) -> Result<Report> {
    let (n, c, b) = (a.tasks, a.concurrency, a.batch);
    // Before the engine is built, as `backstop serve` does: its metric handles bind to it.
    let metrics = backstop_server::install_recorder();
    let store = open_store(url).await?;
    let received = Received::default();
    let push_delay = Duration::from_millis(a.target_delay_ms);
    let target = Loopback::start(sink::noop(received.clone(), push_delay)).await?;

    let mut push_kind = KindConfig::new(
        PUSH_KIND,
        Target::HttpPush {
            url: target.url("/push"),
            secret: Some(SECRET.into()),
        },
    );
    push_kind.concurrency = c;
    let engine = Engine::builder(store)
        .kind(KindConfig::new(ENQUEUE_KIND, Target::Pull))
        .kind(push_kind)
        .build()?;
    let (stop, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let runner = {
        let (engine, rx) = (engine.clone(), stop_rx.clone());
        tokio::spawn(async move { engine.run(stopped(rx)).await })
    };
    let limits = Limits {
        max_batch: b.max(Limits::default().max_batch),
        ..Limits::default()
    };
    let state = AppState::new(engine.clone(), limits, Vec::new(), stop_rx, Some(metrics));
    let api = Loopback::start(backstop_server::app(state)).await?;

    let client = load::client()?;
    let noop = target.url("/noop");
    let singles = bodies(n, |i| enqueue_item("single", i));
    let raw = load::post_all(&client, &noop, singles.clone(), c, StatusCode::OK, 1).await?;
    let single_enqueue = load::post_all(
        &client,
        &api.url("/v1/tasks"),
        singles,
        c,
        StatusCode::CREATED,
        1,
    )
    .await?;
    let batches = bodies(n.div_ceil(b), |j| {
        let items: Vec<String> = (j * b..((j + 1) * b).min(n))
            .map(|i| enqueue_item("batch", i))
            .collect();
        format!(r#"{{"tasks":[{}]}}"#, items.join(","))
    });
    let raw_batch = load::post_all(&client, &noop, batches.clone(), c, StatusCode::OK, b).await?;
    let batched_enqueue = load::post_all(
        &client,
        &api.url("/v1/tasks/batch"),
        batches,
        c,
        StatusCode::OK,
        b,
    )
    .await?;
    let counts = engine
        .store()
        .counts(CountsParams {
            kind: Some(ENQUEUE_KIND.to_string()),
        })
        .await?;
    if counts.pending as usize != 2 * n {
        bail!("expected {} pending tasks, found {}", 2 * n, counts.pending);
    }

    let push_url = target.url("/push");
    let raw_push =
        load::post_all(&client, &push_url, bodies(n, payload), c, StatusCode::OK, 1).await?;
    let push_tasks_per_s = push(&engine, &received, n, b).await?;
    let backlog_push_tasks_per_s =
        push_backlog(engine.store(), &received, target.url("/push"), c, n, b).await?;

    let _ = stop.send(true);
    runner.await?;
    drop(client);
    api.stop().await?;
    target.stop().await?;
    Ok(Report {
        tasks: n,
        concurrency: c,
        target_delay_ms: a.target_delay_ms,
        batch: b,
        durability: "full (WAL, synchronous=FULL)",
        push_signing: "Standard Webhooks (HMAC-SHA256 secret)",
        push_over_raw: push_tasks_per_s / raw_push.requests_per_s,
        backlog_push_tasks_per_s,
        backlog_push_over_raw: backlog_push_tasks_per_s / raw_push.requests_per_s,
        raw,
        single_enqueue,
        raw_batch,
        batched_enqueue,
        raw_push,
        push_tasks_per_s,
    })
}

/// Enqueues `n` push tasks in batches of `batch` while the engine runs; tasks/s from the
/// first batch committed to the last outcome committed.
async fn push(engine: &Engine, received: &Received, n: usize, batch: usize) -> Result<f64> {
    let before = received.get();
    let mut t0 = None;
    for start in (0..n).step_by(batch) {
        let reqs = (start..(start + batch).min(n))
            .map(|i| EnqueueRequest {
                kind: PUSH_KIND.into(),
                key: format!("push-{i}"),
                payload: payload(i).into_bytes(),
                ..Default::default()
            })
            .collect();
        for r in engine.enqueue_many(reqs).await? {
            r?;
        }
        t0.get_or_insert_with(Instant::now);
    }
    let t0 = t0.expect("at least one task");
    // Every request arrived; then the last outcome is committed when no push task is left
    // pending or running (the backlog reads only unfinished rows; counting every status would
    // make the wait a cost of the measured run).
    while received.get() - before < n
        || super::ledger::open_tasks(&**engine.store(), PUSH_KIND).await? > 0
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = t0.elapsed();
    let c = engine
        .store()
        .counts(CountsParams {
            kind: Some(PUSH_KIND.to_string()),
        })
        .await?;
    if c.succeeded as usize != n {
        bail!(
            "push deliveries did not all succeed: {} succeeded, {} failed, {} compensated",
            c.succeeded,
            c.failed,
            c.compensated
        );
    }
    Ok(n as f64 / took.as_secs_f64())
}

/// Enqueues `n` push tasks of a kind no running engine knows, then starts an engine with that
/// kind alone; tasks/s from its start to the last outcome committed: delivery without
/// enqueues beside it, as when a backlog drains.
async fn push_backlog(
    store: &Arc<dyn Store>,
    received: &Received,
    url: String,
    concurrency: usize,
    n: usize,
    batch: usize,
) -> Result<f64> {
    let now = jiff::Timestamp::now();
    for start in (0..n).step_by(batch) {
        let tasks = (start..(start + batch).min(n))
            .map(|i| NewTask {
                id: TaskId::new(),
                kind: BACKLOG_KIND.into(),
                key: format!("backlog-{i}"),
                payload: payload(i).into_bytes(),
                max_attempts: 8,
                run_at: now,
                expires_at: None,
                traceparent: None,
                intake: Default::default(),
                origin: None,
                group: None,
            })
            .collect();
        store.enqueue(EnqueueParams { tasks, now }).await?;
    }
    let mut kind = KindConfig::new(
        BACKLOG_KIND,
        Target::HttpPush {
            url,
            secret: Some(SECRET.into()),
        },
    );
    kind.concurrency = concurrency;
    let engine = Engine::builder(store.clone()).kind(kind).build()?;
    let before = received.get();
    let t0 = Instant::now();
    let (stop, runner) = super::run_engine(&engine);
    while received.get() - before < n
        || super::ledger::open_tasks(&**store, BACKLOG_KIND).await? > 0
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = t0.elapsed();
    let _ = stop.send(());
    runner.await?;
    let c = store
        .counts(CountsParams {
            kind: Some(BACKLOG_KIND.to_string()),
        })
        .await?;
    if c.succeeded as usize != n {
        bail!(
            "backlog deliveries did not all succeed: {} succeeded, {} failed, {} compensated",
            c.succeeded,
            c.failed,
            c.compensated
        );
    }
    Ok(n as f64 / took.as_secs_f64())
}

/// `n` request bodies, made before any timing starts.
fn bodies(n: usize, make: impl Fn(usize) -> String) -> Arc<[Bytes]> {
    (0..n).map(|i| Bytes::from(make(i))).collect()
}

/// One task of the enqueue kind, as the API takes it.
fn enqueue_item(prefix: &str, i: usize) -> String {
    format!(
        r#"{{"kind":"{ENQUEUE_KIND}","key":"{prefix}-{i}","payload":{}}}"#,
        payload(i)
    )
}

/// A small business payload.
fn payload(i: usize) -> String {
    format!(r#"{{"order":"order-{i:08}","amount":1999,"currency":"USD"}}"#)
}
