//! `backstop bench ledger` (and plain `backstop bench`): enqueue N tasks in batches while the
//! engine drains them with a no-op in-process handler, on a fresh SQLite file with the default
//! durability (`synchronous = FULL`). Every attempt is recorded as in production.

use super::TempDir;
use crate::cli::LedgerBenchArgs;
use crate::commands::print_json;
use anyhow::{Result, bail};
use backstop::{
    Engine, EngineOptions, EnqueueRequest, KindConfig, Outcome, Target, handler, open_store,
};
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, oneshot};

const KIND: &str = "bench.noop";

#[derive(Serialize)]
struct Report {
    tasks: usize,
    batch: usize,
    durability: &'static str,
    enqueue_tasks_per_s: f64,
    drain_tasks_per_s: f64,
    end_to_end_tasks_per_s: f64,
    enqueue_to_start_p50_ms: f64,
    enqueue_to_start_p99_ms: f64,
}

/// Runs the ledger bench and prints its report.
pub async fn run(a: LedgerBenchArgs) -> Result<()> {
    if a.tasks == 0 || a.batch == 0 || a.concurrency == 0 {
        bail!("--tasks, --batch and --concurrency must be at least 1");
    }
    let dir = TempDir::new("bench")?;
    let r = measure(&dir.sqlite_url(), &a).await?;
    if a.json {
        return print_json(&r);
    }
    println!("tasks: {}", r.tasks);
    println!("batch: {}", r.batch);
    println!("durability: {}", r.durability);
    println!("enqueue: {:.0} tasks/s", r.enqueue_tasks_per_s);
    println!("drain: {:.0} tasks/s", r.drain_tasks_per_s);
    println!("end-to-end: {:.0} tasks/s", r.end_to_end_tasks_per_s);
    println!("enqueue-to-start p50: {:.1} ms", r.enqueue_to_start_p50_ms);
    println!("enqueue-to-start p99: {:.1} ms", r.enqueue_to_start_p99_ms);
    Ok(())
}

async fn measure(url: &str, a: &LedgerBenchArgs) -> Result<Report> {
    let store = open_store(url).await?;
    let latencies_us = Arc::new(Mutex::new(Vec::with_capacity(a.tasks)));
    let started = Arc::new(AtomicUsize::new(0));
    let first_start: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let all_started = Arc::new(Notify::new());
    let (lat, st, fs, done, total) = (
        latencies_us.clone(),
        started.clone(),
        first_start.clone(),
        all_started.clone(),
        a.tasks,
    );
    let mut kind = KindConfig::new(KIND, Target::InProcess);
    kind.concurrency = a.concurrency;
    let engine = Engine::builder(store.clone())
        .kind(kind)
        .handler(
            KIND,
            handler(move |task| {
                fs.get_or_init(Instant::now);
                let waited = jiff::Timestamp::now().duration_since(task.enqueued_at);
                lat.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(waited.as_micros().max(0) as u64);
                if st.fetch_add(1, Ordering::Relaxed) + 1 == total {
                    done.notify_one();
                }
                async { Outcome::Success }
            }),
        )
        .options(EngineOptions {
            claim_batch: 1024.min(a.concurrency),
            complete_batch: 4096,
            poll_interval: Duration::from_millis(5),
            ..Default::default()
        })
        .build()?;
    let (stop, stopped) = oneshot::channel::<()>();
    let runner = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .run(async {
                    let _ = stopped.await;
                })
                .await
        })
    };

    let t0 = Instant::now();
    let mut next = 0;
    while next < a.tasks {
        let end = (next + a.batch).min(a.tasks);
        let reqs = (next..end)
            .map(|i| EnqueueRequest {
                kind: KIND.into(),
                key: format!("bench-{i}"),
                payload: format!(r#"{{"n":{i}}}"#).into_bytes(),
                ..Default::default()
            })
            .collect();
        for r in engine.enqueue_many(reqs).await? {
            r?;
        }
        next = end;
    }
    let enqueued = t0.elapsed();
    if started.load(Ordering::Relaxed) < a.tasks {
        all_started.notified().await;
    }
    // Every handler has run; wait for the last outcomes to be committed.
    loop {
        if store.counts(Some(KIND)).await?.succeeded as usize == a.tasks {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let finished = t0.elapsed();
    let drain_start = first_start.get().copied().unwrap_or(t0).duration_since(t0);
    let _ = stop.send(());
    let _ = runner.await;

    let mut lat = std::mem::take(&mut *latencies_us.lock().unwrap_or_else(|e| e.into_inner()));
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
    let n = a.tasks as f64;
    Ok(Report {
        tasks: a.tasks,
        batch: a.batch,
        durability: "full (WAL, synchronous=FULL)",
        enqueue_tasks_per_s: n / enqueued.as_secs_f64(),
        drain_tasks_per_s: n / (finished - drain_start).as_secs_f64(),
        end_to_end_tasks_per_s: n / finished.as_secs_f64(),
        enqueue_to_start_p50_ms: pct(0.50),
        enqueue_to_start_p99_ms: pct(0.99),
    })
}
