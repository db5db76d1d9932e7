//! `backstop bench ledger` (and plain `backstop bench`): enqueue N tasks in batches while the
//! engine drains them with a no-op in-process handler, on a fresh SQLite file with the default
//! durability (`synchronous = FULL`), or with `--database` in a fresh schema (PostgreSQL) or
//! table prefix (MySQL/MariaDB) on that server, dropped afterwards. Every attempt is recorded
//! as in production. `--prefill-finished N` first fills the ledger with N succeeded tasks, to
//! measure how the drain holds up as finished tasks accumulate.

use super::TempDir;
use crate::cli::LedgerBenchArgs;
use crate::commands::print_json;
use anyhow::{Context, Result, bail};
use backstop::{
    Engine, EngineOptions, EnqueueRequest, KindConfig, Outcome, Status, Store, Target, TaskId,
    handler, open_store,
};
use backstop_core::AttemptOutcome;
use backstop_core::store::{
    BacklogParams, ClaimParams, CompleteParams, Completion, EnqueueParams, EnqueueResult, LeaseRef,
};
use backstop_core::task::NewTask;
use serde::Serialize;
use sqlx::{AssertSqlSafe, Connection, MySqlConnection, PgConnection};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

const KIND: &str = "bench.noop";
/// The kind of the prefilled finished tasks. The claim indexes of every store are partial or
/// status-led, so finished rows of any kind are outside them; a kind of their own keeps the
/// bench's progress check (counts of its kind) from counting them too.
pub(super) const FINISHED_KIND: &str = "bench.finished";
/// Tasks per prefill statement (enqueue, claim, complete).
const PREFILL_CHUNK: usize = 2000;
/// Prefill pipelines running at once.
const PREFILL_PIPELINES: usize = 4;

#[derive(Serialize)]
struct Report {
    store: &'static str,
    /// The schema (PostgreSQL) or table prefix (MySQL) the bench worked in.
    isolated_in: Option<String>,
    prefill_finished: usize,
    prefill_tasks_per_s: Option<f64>,
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

/// Where the bench runs.
pub(super) enum Place {
    Sqlite(TempDir),
    /// A fresh schema on a PostgreSQL server.
    Postgres {
        server: String,
        schema: String,
    },
    /// A fresh table prefix on a MySQL/MariaDB server.
    Mysql {
        server: String,
        prefix: String,
    },
}

impl Place {
    pub(super) fn new(database: Option<&str>) -> Result<Place> {
        let Some(url) = database else {
            return Ok(Place::Sqlite(TempDir::new("bench")?));
        };
        let unique = TaskId::new().0.simple().to_string();
        match url.split(':').next().unwrap_or("") {
            "sqlite" => Ok(Place::Sqlite(TempDir::new("bench")?)),
            "postgres" | "postgresql" => {
                if url.contains("schema=") {
                    bail!("--database: leave out schema=; the bench makes a fresh schema");
                }
                Ok(Place::Postgres {
                    server: url.to_string(),
                    schema: format!("bench_{unique}"),
                })
            }
            "mysql" | "mariadb" => {
                if url.contains("prefix=") {
                    bail!("--database: leave out prefix=; the bench makes a fresh table prefix");
                }
                Ok(Place::Mysql {
                    server: url.to_string(),
                    prefix: format!("bench_{}_", &unique[20..]),
                })
            }
            _ => bail!("--database: expected a sqlite://, postgres:// or mysql:// URL"),
        }
    }

    pub(super) fn url(&self) -> String {
        let with = |server: &str, key: &str, value: &str| {
            let sep = if server.contains('?') { '&' } else { '?' };
            format!("{server}{sep}{key}={value}")
        };
        match self {
            Place::Sqlite(dir) => dir.sqlite_url(),
            Place::Postgres { server, schema } => with(server, "schema", schema),
            Place::Mysql { server, prefix } => with(server, "prefix", prefix),
        }
    }

    pub(super) fn store(&self) -> &'static str {
        match self {
            Place::Sqlite(_) => "sqlite",
            Place::Postgres { .. } => "postgres",
            Place::Mysql { .. } => "mysql",
        }
    }

    fn isolated_in(&self) -> Option<String> {
        match self {
            Place::Sqlite(_) => None,
            Place::Postgres { schema, .. } => Some(schema.clone()),
            Place::Mysql { prefix, .. } => Some(prefix.clone()),
        }
    }

    /// Statistics and dead rows settled as a long-running server's would be (autovacuum and
    /// background analysis): the same for an empty and a prefilled ledger.
    pub(super) async fn settle(&self) -> Result<()> {
        match self {
            Place::Sqlite(_) => {}
            Place::Postgres { server, schema } => {
                let mut conn = PgConnection::connect(server).await?;
                let sql = format!("VACUUM ANALYZE \"{schema}\".tasks, \"{schema}\".events");
                sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await?;
                // Needs superuser or pg_checkpoint; without it the bench still runs.
                let _ = sqlx::raw_sql("CHECKPOINT").execute(&mut conn).await;
                conn.close().await?;
            }
            Place::Mysql { prefix, .. } => {
                let mut conn = self.mysql().await?;
                let sql = format!("ANALYZE TABLE {prefix}tasks, {prefix}events");
                sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await?;
                conn.close().await?;
            }
        }
        Ok(())
    }

    async fn mysql(&self) -> Result<MySqlConnection> {
        let Place::Mysql { server, .. } = self else {
            bail!("not a MySQL place");
        };
        let opts = backstop_store_mysql::MysqlOptions::from_url(server)?;
        Ok(MySqlConnection::connect(&opts.url).await?)
    }

    /// Runs `measure` in a fresh place for `database` (see [`Place::new`]), then drops what
    /// it made, whether the measurement worked or not.
    pub(super) async fn measure_in<R>(
        database: Option<&str>,
        measure: impl AsyncFnOnce(&Place) -> Result<R>,
    ) -> Result<R> {
        let place = Place::new(database)?;
        let r = measure(&place).await;
        place
            .drop_all()
            .await
            .context("dropping the bench's tables")?;
        r
    }

    /// Drops the schema or the prefixed tables the bench made.
    pub(super) async fn drop_all(&self) -> Result<()> {
        match self {
            Place::Sqlite(_) => {}
            Place::Postgres { server, schema } => {
                let mut conn = PgConnection::connect(server).await?;
                let sql = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
                sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await?;
                conn.close().await?;
            }
            Place::Mysql { prefix, .. } => {
                let mut conn = self.mysql().await?;
                let tables: Vec<String> = sqlx::query_scalar(
                    "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                     WHERE table_schema = DATABASE() AND table_name LIKE ?",
                )
                .bind(format!("{}%", prefix.replace('_', "\\_")))
                .fetch_all(&mut conn)
                .await?;
                if !tables.is_empty() {
                    let sql = format!("DROP TABLE IF EXISTS {}", tables.join(", "));
                    sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await?;
                }
                conn.close().await?;
            }
        }
        Ok(())
    }
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
            "bench: could not drop {}: {e:#}",
            place.isolated_in().unwrap_or_default()
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

/// Fills the ledger with `n` succeeded tasks of [`FINISHED_KIND`], through the store's batch
/// enqueue, claim and complete, as the engine writes them (one attempt each).
pub(super) async fn prefill(store: &Arc<dyn Store>, n: usize) -> Result<Duration> {
    let t0 = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut pipelines = tokio::task::JoinSet::new();
    for p in 0..PREFILL_PIPELINES {
        let (store, next, done) = (store.clone(), next.clone(), done.clone());
        pipelines.spawn(async move {
            let owner = format!("bench-prefill-{p}");
            loop {
                let from = next.fetch_add(PREFILL_CHUNK, Ordering::Relaxed);
                if from >= n {
                    return Ok::<_, anyhow::Error>(());
                }
                let to = (from + PREFILL_CHUNK).min(n);
                let now = jiff::Timestamp::now();
                let tasks = (from..to)
                    .map(|i| NewTask {
                        id: TaskId::new(),
                        kind: FINISHED_KIND.into(),
                        key: format!("done-{i}"),
                        payload: format!(r#"{{"n":{i}}}"#).into_bytes(),
                        max_attempts: 8,
                        run_at: now,
                        expires_at: None,
                        traceparent: None,
                    })
                    .collect();
                for r in store.enqueue(EnqueueParams { tasks, now }).await? {
                    if !matches!(r, EnqueueResult::Created(_)) {
                        bail!("prefill: unexpected enqueue result {r:?}");
                    }
                }
                // Claim until this chunk's worth is leased (other pipelines may take some of
                // these rows, and this one some of theirs: the count is what matters).
                let mut left = to - from;
                while left > 0 {
                    let now = jiff::Timestamp::now();
                    let claimed = store
                        .claim(ClaimParams {
                            kind: FINISHED_KIND.into(),
                            limit: left,
                            start: left,
                            owner: owner.clone(),
                            now,
                            lease_until: now + Duration::from_secs(600),
                            max_attempts: 8,
                        })
                        .await?;
                    if claimed.is_empty() {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                    left -= claimed.len();
                    let ended = jiff::Timestamp::now();
                    let completions = claimed
                        .iter()
                        .map(|t| Completion {
                            lease: LeaseRef {
                                id: t.id,
                                epoch: t.epoch,
                            },
                            attempt: t.attempt,
                            status: Status::Succeeded,
                            run_at: None,
                            last_error: None,
                            reason: None,
                            outcome: AttemptOutcome::Succeeded,
                            http_status: None,
                            started_at: now,
                            ended_at: ended,
                            worker: owner.clone(),
                        })
                        .collect();
                    let r = store
                        .complete(CompleteParams {
                            completions,
                            starts: None,
                            now: ended,
                        })
                        .await?;
                    if !r.stale.is_empty() {
                        bail!("prefill: {} completions were stale", r.stale.len());
                    }
                    let total = done.fetch_add(claimed.len(), Ordering::Relaxed) + claimed.len();
                    if total / 100_000 != (total - claimed.len()) / 100_000 {
                        eprintln!(
                            "bench: prefilled {total} of {n} ({:.0} tasks/s)",
                            total as f64 / t0.elapsed().as_secs_f64()
                        );
                    }
                }
            }
        });
    }
    while let Some(r) = pipelines.join_next().await {
        r??;
    }
    let c = store.counts(Some(FINISHED_KIND)).await?;
    if c.succeeded as usize != n || c.total() as usize != n {
        bail!("prefill: expected {n} succeeded tasks, found {c:?}");
    }
    Ok(t0.elapsed())
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
    // Every handler has run; wait for the last outcomes to be committed: no task of the kind
    // left pending or running. The backlog reads only unfinished rows (the partial or
    // status-led indexes), where counting every status would scan all the finished ones and
    // make the wait itself a cost of the measured run.
    while open_tasks(&*store, KIND).await? > 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let finished = t0.elapsed();
    let succeeded = store.counts(Some(KIND)).await?.succeeded as usize;
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
        tasks: a.tasks,
        batch: a.batch,
        durability: match place {
            Place::Sqlite(_) => "full (WAL, synchronous=FULL)",
            Place::Postgres { .. } => "the server's (synchronous_commit as configured)",
            Place::Mysql { .. } => "the server's (innodb_flush_log_at_trx_commit as configured)",
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
