//! awa driver for bench/peers/run.sh: insert N no-op jobs in batches, then start one awa
//! worker client with a no-op handler, and time from the first insert to the last committed
//! completion.
//!
//! Every run starts from an empty `awa` schema: `DROP SCHEMA awa CASCADE`, awa's migrations,
//! then the default queue-storage engine (awa 0.6's worker engine) installed and activated
//! before the first insert, as a fresh cluster's first worker would do. The inserts use
//! awa's batch API (INSERT_API below); the worker is one `Client` on one queue with a no-op
//! handler; durability settings are awa's and the server's (nothing turned off). The end is
//! the first moment awa's tables hold N committed completions, polled once every handler has
//! run (see `committed_completions`); afterwards awa's own exact counts
//! (`QueueStorage::queue_counts`) and its `awa.terminal_jobs` view must show N jobs
//! completed, none available, running or failed.
//!
//! Env: DATABASE_URL (required), N (100000), BATCH (1000), MAX_WORKERS (1000: the queue's
//! `max_workers`; awa ships 50), CLAIM_BATCH (512, awa's `claim_batch_size` default), CLAIMERS
//! (1, awa's default), CONNECTIONS (20: the sqlx pool the client and the inserts share),
//! DEADLINE_MS (unset: awa's default `deadline_duration`, 5 minutes), INSERT_API (copy),
//! ANALYZE_AFTER_INSERT (0), RUST_LOG (warn). Everything else is awa's default, including its
//! own AWA_COMPLETION_* variables when unset. INSERT_API: `copy` =
//! `QueueStorage::enqueue_params_copy` (what awa's docs advise for bulk producers on queue
//! storage: one transaction per batch, the rows COPYed into the ready partition), `batch` =
//! `QueueStorage::enqueue_params_batch` (the same transaction with a multi-row INSERT),
//! `insert_many` = `awa::insert_many` (one statement per batch, which calls the compatibility
//! function `awa.insert_job_compat` once per row).
//!
//! Prints one line: RESULT system=awa n=... inserted_per_s=... drained_per_s=...
//! overall_per_s=... insert_s=... drain_s=... total_s=... start_s=... settings=...
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use awa::{
    Client, InsertOpts, InsertParams, JobArgs, JobResult, QueueConfig, QueueStorage,
    QueueStorageConfig,
};
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgPoolOptions;
use tokio::sync::Notify;

const QUEUE: &str = "bench";
const KIND: &str = "noop";

#[derive(Serialize, Deserialize)]
struct Noop {
    n: u64,
}

impl JobArgs for Noop {
    fn kind() -> &'static str {
        KIND
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// From `awa.terminal_jobs`: completed rows, other terminal rows, first `created_at` and last
/// `finalized_at` (epoch seconds).
type TerminalRows = (i64, i64, Option<f64>, Option<f64>);

fn env_u64(name: &str, default: u64) -> Result<u64, BoxError> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|e| format!("{name}={v:?}: {e}").into()),
        _ => Ok(default),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum InsertApi {
    Copy,
    Batch,
    InsertMany,
}

impl InsertApi {
    fn from_env() -> Result<Self, BoxError> {
        match std::env::var("INSERT_API").as_deref().unwrap_or("copy") {
            "" | "copy" => Ok(Self::Copy),
            "batch" => Ok(Self::Batch),
            "insert_many" => Ok(Self::InsertMany),
            other => {
                Err(format!("INSERT_API={other:?}: expected copy, batch or insert_many").into())
            }
        }
    }
    fn name(self) -> &'static str {
        match self {
            Self::Copy => "copy",
            Self::Batch => "batch",
            Self::InsertMany => "insert_many",
        }
    }
}

/// Shared by the handlers: how many ran, when the first one started, and a wake-up for main
/// once all N have run.
struct Progress {
    n: u64,
    executed: AtomicU64,
    first_start: OnceLock<Instant>,
    all_executed: Notify,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,sqlx::query=error")),
        )
        .with_writer(std::io::stderr)
        .init();

    let url = std::env::var("DATABASE_URL").map_err(|_| "DATABASE_URL is required")?;
    let n = env_u64("N", 100_000)?;
    let batch = env_u64("BATCH", 1000)?.max(1);
    let insert_api = InsertApi::from_env()?;
    let workers = env_u64("MAX_WORKERS", 1000)? as u32;
    let claim_batch = env_u64("CLAIM_BATCH", 512)? as usize;
    let claimers = env_u64("CLAIMERS", 1)? as u16;
    let pool_size = env_u64("CONNECTIONS", 20)? as u32;
    let deadline_ms = match std::env::var("DEADLINE_MS") {
        Ok(v) if !v.trim().is_empty() => Some(v.trim().parse::<u64>()?),
        _ => None,
    };
    let analyze = env_u64("ANALYZE_AFTER_INSERT", 0)? != 0;
    if n == 0 {
        return Err("N must be at least 1".into());
    }

    let pool = PgPoolOptions::new()
        .max_connections(pool_size)
        .connect(&url)
        .await?;

    // A fresh schema every run: no jobs, partitions, counters or ring state from an earlier run.
    sqlx::query("DROP SCHEMA IF EXISTS awa CASCADE")
        .execute(&pool)
        .await?;
    awa::migrations::run(&pool).await?;
    // Migrations leave the storage state at `canonical`; a fresh cluster's first worker
    // installs and activates queue storage (0.6's engine) before it works. Do the same here
    // before inserting, or the inserts would go to the canonical tables and pin the worker to
    // the canonical engine.
    let store = QueueStorage::new(QueueStorageConfig::default())?;
    store.install(&pool).await?;
    let status = awa::storage::status(&pool).await?;
    if status.active_engine != "queue_storage" || status.state != "active" {
        return Err(format!(
            "expected queue storage active, got engine {} state {}",
            status.active_engine, status.state
        )
        .into());
    }

    let progress = Arc::new(Progress {
        n,
        executed: AtomicU64::new(0),
        first_start: OnceLock::new(),
        all_executed: Notify::new(),
    });

    let mut queue_config = QueueConfig {
        max_workers: workers,
        claim_batch_size: claim_batch,
        claimers,
        ..Default::default()
    };
    if let Some(ms) = deadline_ms {
        queue_config.deadline_duration = Duration::from_millis(ms);
    }
    let handler_progress = progress.clone();
    let client = Client::builder(pool.clone())
        .queue(QUEUE, queue_config.clone())
        .register::<Noop, _, _>(move |_args, _ctx| {
            let p = handler_progress.clone();
            async move {
                p.first_start.get_or_init(Instant::now);
                if p.executed.fetch_add(1, Ordering::AcqRel) + 1 == p.n {
                    p.all_executed.notify_one();
                }
                Ok(JobResult::Completed)
            }
        })
        .build()?;

    // Insert all N before the worker starts, in batches of BATCH.
    let t0 = Instant::now();
    let mut from = 0u64;
    while from < n {
        let to = (from + batch).min(n);
        let jobs: Vec<InsertParams> = (from..to)
            .map(|i| InsertParams {
                kind: KIND.to_string(),
                args: serde_json::json!({ "n": i }),
                opts: InsertOpts {
                    queue: QUEUE.to_string(),
                    ..Default::default()
                },
            })
            .collect();
        let inserted = match insert_api {
            InsertApi::Copy => store.enqueue_params_copy(&pool, &jobs).await?,
            InsertApi::Batch => store.enqueue_params_batch(&pool, &jobs).await?,
            InsertApi::InsertMany => awa::insert_many(&pool, &jobs).await?.len(),
        };
        if inserted as u64 != to - from {
            return Err(format!("batch {from}..{to}: {inserted} inserted").into());
        }
        from = to;
    }
    let t_inserted = Instant::now();
    // ANALYZE_AFTER_INSERT=1: refresh the planner's statistics between the inserts and the
    // drain, as autovacuum would have on a long-running server (the schema is fresh, so
    // PostgreSQL still plans for empty tables). Not counted in any figure (analyze_s).
    if analyze {
        sqlx::query("ANALYZE").execute(&pool).await?;
    }
    let t_analyzed = Instant::now();

    let t_worker = Instant::now();
    client.start().await?;
    let t_started = Instant::now();
    progress.all_executed.notified().await;
    let t_all_executed = Instant::now();

    // Every handler has run; wait until awa's tables hold N committed completions (they are
    // committed in batches after the handlers return). The end is the start of the first poll
    // that sees them all.
    let mut polls = 0u32;
    let t_done = loop {
        let t = Instant::now();
        let completed = committed_completions(&pool).await?;
        polls += 1;
        if completed >= n as i64 {
            eprintln!(
                "awa: {completed} completions committed {:.3}s after the last handler ran ({polls} polls)",
                (t - t_all_executed).as_secs_f64()
            );
            break t;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    client.shutdown(Duration::from_secs(10)).await;

    // Check the outcome with awa's own accounting, after an ANALYZE (its exact counts and the
    // `awa.terminal_jobs` view plan badly on tables PostgreSQL still thinks are empty): every
    // job executed once and completed, none available, running or failed. Completed jobs stay
    // in queue storage's terminal history (`awa.terminal_jobs`) until queue-ring prune reclaims
    // their segment; pruned ones are counted in awa's terminal rollups.
    sqlx::query("ANALYZE").execute(&pool).await?;
    let counts = store.queue_counts(&pool, QUEUE).await?;
    let terminal: TerminalRows = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE state = 'completed'),
                count(*) FILTER (WHERE state <> 'completed'),
                extract(epoch FROM min(created_at))::float8,
                extract(epoch FROM max(finalized_at))::float8
         FROM awa.terminal_jobs WHERE queue = $1",
    )
    .bind(QUEUE)
    .fetch_one(&pool)
    .await?;
    let (live_completed, live_other, first_created, last_finalized) = terminal;
    let executed = progress.executed.load(Ordering::Acquire);
    if executed != n
        || counts.terminal != n as i64
        || counts.available != 0
        || counts.running != 0
        || counts.pruned_failed != 0
        || live_other != 0
    {
        return Err(format!(
            "expected {n} executed and completed, got {executed} executed, {counts:?}, \
             {live_completed} completed and {live_other} other terminal rows in awa.terminal_jobs"
        )
        .into());
    }
    if let (Some(a), Some(b)) = (first_created, last_finalized) {
        eprintln!(
            "awa: terminal_jobs: {live_completed} completed rows, first created_at -> last finalized_at {:.3}s",
            b - a
        );
    }
    pool.close().await;

    let first_start = *progress.first_start.get().ok_or("no handler ran")?;
    let insert_s = (t_inserted - t0).as_secs_f64();
    let drain_s = (t_done - first_start).as_secs_f64();
    let total_s = insert_s + (t_done - t_analyzed).as_secs_f64();
    let start_s = (t_started - t_worker).as_secs_f64();
    let per_s = |s: f64| (n as f64 / s).round() as u64;
    println!(
        "RESULT system=awa n={n} inserted_per_s={} drained_per_s={} overall_per_s={} \
         insert_s={insert_s:.3} drain_s={drain_s:.3} total_s={total_s:.3} start_s={start_s:.3} \
         drain_from_worker_start_s={:.3} analyze_s={} polls={polls} \
         settings=insert:{},maxWorkers:{workers},claimBatch:{claim_batch},claimers:{claimers},connections:{pool_size},deadline:{},batch:{batch}",
        per_s(insert_s),
        per_s(drain_s),
        per_s(total_s),
        (t_done - t_worker).as_secs_f64(),
        if analyze { format!("{:.3}", (t_analyzed - t_inserted).as_secs_f64()) } else { "-".into() },
        insert_api.name(),
        queue_config.deadline_duration.as_millis(),
    );
    Ok(())
}

/// Completions committed in queue `bench`, read from awa's queue-storage tables without its
/// exact-count query (which plans badly on fresh tables): successful completions are written
/// compactly, one row per completed batch with its `completed_count`, to
/// `receipt_completion_batches` (minus `receipt_completion_tombstones`, items deleted later),
/// or as rows in `done_entries`; segments reclaimed by queue-ring prune are counted in
/// `queue_lanes` / `queue_terminal_rollups`. The same sum as awa's `QueueCounts::terminal`,
/// restricted to state `completed`, and small scans only.
async fn committed_completions(pool: &sqlx::PgPool) -> Result<i64, BoxError> {
    let completed: i64 = sqlx::query_scalar(
        "SELECT (COALESCE((SELECT sum(completed_count) FROM awa.receipt_completion_batches
                           WHERE queue = $1), 0)
                 - (SELECT count(*) FROM awa.receipt_completion_tombstones WHERE queue = $1)
                 + (SELECT count(*) FROM awa.done_entries WHERE queue = $1 AND state = 'completed')
                 + COALESCE((SELECT sum(GREATEST(lanes.pruned_completed_count,
                                                 COALESCE(rollups.pruned_completed_count, 0)))
                             FROM awa.queue_lanes AS lanes
                             LEFT JOIN awa.queue_terminal_rollups AS rollups USING (queue, priority)
                             WHERE lanes.queue = $1), 0))::bigint",
    )
    .bind(QUEUE)
    .fetch_one(pool)
    .await?;
    Ok(completed)
}
