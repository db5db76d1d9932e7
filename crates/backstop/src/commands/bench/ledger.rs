//! `backstop bench ledger` (and plain `backstop bench`): enqueue N tasks in batches while the
//! engine drains them with a no-op in-process handler, on a fresh SQLite file with the default
//! durability (`synchronous = FULL`), or with `--database` in a fresh schema (PostgreSQL) or
//! table prefix (MySQL/MariaDB) on that server, dropped afterwards. Every attempt is recorded
//! as in production. `--prefill-finished N` first fills the ledger with N succeeded tasks, to
//! measure how the drain holds up as finished tasks accumulate.

use super::place::Place;
use super::prefill::prefill;
use crate::cli::LedgerBenchArgs;
use crate::commands::print_json;
use anyhow::{Context, Result, bail};
use backstop::{
    Engine, EngineOptions, EnqueueRequest, KindConfig, Outcome, Store, Target, handler, open_store,
};
use backstop_core::store::BacklogParams;
use backstop_core::store::CountsParams;
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

const KIND: &str = "bench.noop";

#[derive(Serialize)]
struct Report {
    store: &'static str,
    /// The schema (PostgreSQL) or table prefix (MySQL) the bench worked in.
    isolated_in: Option<String>,
    prefill_finished: usize,
    prefill_tasks_per_s: Option<f64>,
    /// Ordering groups the tasks were spread over (0: none).
    groups: usize,
    /// Tenants the tasks were spread over under a concurrency limit per tenant (0: none).
    limit_keys: usize,
    /// The most attempts at once per tenant, with `limit_keys`.
    limit_max: Option<usize>,
    /// Starts a second per tenant (and burst), with `limit_keys`.
    rate_limit: Option<u32>,
    tasks: usize,
    batch: usize,
    durability: &'static str,
    enqueue_tasks_per_s: f64,
    drain_tasks_per_s: f64,
    end_to_end_tasks_per_s: f64,
    enqueue_to_start_p50_ms: f64,
    enqueue_to_start_p99_ms: f64,
}

/// The ledger bench's flags with the server from the global `--database` flag.
pub fn with_database(mut a: LedgerBenchArgs, database: Option<String>) -> LedgerBenchArgs {
    a.database = database;
    a
}

/// Runs the ledger bench and prints its report.
pub async fn run(a: LedgerBenchArgs) -> Result<()> {
    if a.tasks == 0 || a.batch == 0 || a.concurrency == 0 {
        bail!("--tasks, --batch and --concurrency must be at least 1");
    }
    let place = Place::new(a.database.as_deref())?;
    if let Some(name) = place.isolated_in() {
        eprintln!(
            "bench: working in {name} on {} (dropped afterwards)",
            place.store()
        );
    }
    let r = measure(&place, &a).await;
    if let Err(e) = place.drop_all().await {
        eprintln!(
            "bench: could not drop {}: {}",
            place.isolated_in().unwrap_or_default(),
            crate::error_line::error_line(e.as_ref())
        );
    }
    let r = r?;
    if a.json {
        return print_json(&r);
    }
    println!("store: {}", r.store);
    if let Some(name) = &r.isolated_in {
        println!("isolated in: {name} (dropped)");
    }
    if r.prefill_finished > 0 {
        println!(
            "prefilled: {} finished tasks ({:.0} tasks/s)",
            r.prefill_finished,
            r.prefill_tasks_per_s.unwrap_or(0.0)
        );
    }
    if r.groups > 0 {
        println!("ordering groups: {}", r.groups);
    }
    if let Some(max) = r.limit_max {
        println!("limit: {max} at once per tenant, {} tenants", r.limit_keys);
    }
    if let Some(rate) = r.rate_limit {
        println!(
            "rate: {rate} starts a second per tenant, burst {rate}, {} tenants",
            r.limit_keys
        );
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

async fn measure(place: &Place, a: &LedgerBenchArgs) -> Result<Report> {
    let url = place.url();
    let store = open_store(&url)
        .await
        .with_context(|| format!("database {}", place.store()))?;
    let prefill_took = if a.prefill_finished > 0 {
        Some(prefill(&store, a.prefill_finished).await?)
    } else {
        None
    };
    place.settle().await.context("settling the database")?;
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
    if a.groups > 0 {
        kind.ordering = Some(backstop_core::group::Ordering::default());
    }
    if a.limit_keys > 0 && a.limit_max > 0 {
        kind.concurrency_limit = Some(backstop_core::limit::ConcurrencyLimit {
            key: "/tenant".into(),
            max: u32::try_from(a.limit_max).unwrap_or(u32::MAX),
            missing_key: Default::default(),
        });
    }
    if a.limit_keys > 0 && a.rate_limit > 0 {
        kind.rate_limit = Some(backstop_core::limit::RateLimit {
            key: "/tenant".into(),
            limit: a.rate_limit,
            period: Duration::from_secs(1),
            burst: a.rate_limit,
            missing_key: Default::default(),
        });
    }
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
    let (stop, runner) = super::run_engine(&engine);

    let t0 = Instant::now();
    let mut next = 0;
    while next < a.tasks {
        let end = (next + a.batch).min(a.tasks);
        let reqs = (next..end)
            .map(|i| EnqueueRequest {
                kind: KIND.into(),
                key: format!("bench-{i}"),
                // The same payload with or without a limit, so that only the limit differs.
                payload: format!(r#"{{"n":{i},"tenant":"t{}"}}"#, i % a.limit_keys.max(1))
                    .into_bytes(),
                group: (a.groups > 0).then(|| format!("g{}", i % a.groups)),
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
    // Every handler has run; wait for the last outcomes to be committed: no task of the kind
    // left pending or running. The backlog reads only unfinished rows (the partial or
    // status-led indexes), where counting every status would scan all the finished ones and
    // make the wait itself a cost of the measured run.
    while open_tasks(&*store, KIND).await? > 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let finished = t0.elapsed();
    let succeeded = store
        .counts(CountsParams {
            kind: Some(KIND.to_string()),
        })
        .await?
        .succeeded as usize;
    if succeeded != a.tasks {
        bail!("{succeeded} of {} tasks succeeded", a.tasks);
    }
    let drain_start = first_start.get().copied().unwrap_or(t0).duration_since(t0);
    let _ = stop.send(());
    let _ = runner.await;

    let mut lat = std::mem::take(&mut *latencies_us.lock().unwrap_or_else(|e| e.into_inner()));
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
    let n = a.tasks as f64;
    Ok(Report {
        store: place.store(),
        isolated_in: place.isolated_in(),
        prefill_finished: a.prefill_finished,
        prefill_tasks_per_s: prefill_took.map(|t| a.prefill_finished as f64 / t.as_secs_f64()),
        groups: a.groups,
        limit_keys: a.limit_keys,
        limit_max: (a.limit_keys > 0 && a.limit_max > 0).then_some(a.limit_max),
        rate_limit: (a.limit_keys > 0 && a.rate_limit > 0).then_some(a.rate_limit),
        tasks: a.tasks,
        batch: a.batch,
        durability: match place {
            Place::Sqlite(_) => "full (WAL, synchronous=FULL)",
            Place::Postgres(_) => "the server's (synchronous_commit as configured)",
            Place::Mysql(_) => "the server's (innodb_flush_log_at_trx_commit as configured)",
        },
        enqueue_tasks_per_s: n / enqueued.as_secs_f64(),
        drain_tasks_per_s: n / (finished - drain_start).as_secs_f64(),
        end_to_end_tasks_per_s: n / finished.as_secs_f64(),
        enqueue_to_start_p50_ms: pct(0.50),
        enqueue_to_start_p99_ms: pct(0.99),
    })
}

/// Tasks of `kind` still pending or running.
pub(crate) async fn open_tasks(store: &dyn Store, kind: &str) -> Result<u64> {
    let now = jiff::Timestamp::now();
    let backlog = store
        .backlog(BacklogParams {
            now,
            overdue_before: now,
            sample: 0,
        })
        .await?;
    Ok(backlog
        .iter()
        .find(|b| b.kind == kind)
        .map_or(0, |b| b.pending + b.running))
}
