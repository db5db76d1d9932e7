//! Running one scenario: a fresh ledger, the target, the processes, the client enqueuing
//! while the fault happens, then waiting for recovery and judging.

use crate::client::{self, Acks};
use crate::database::{self, Database, Servers};
use crate::fleet::{Fleet, FleetConfig};
use crate::profile::{Fault, Scenario};
use crate::target::{self, Behaviour, Target, now_ms};
use crate::verdict::{self, LedgerStatus, Row};
use anyhow::{Context as _, bail};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The kind's per-attempt timeout; the slow target answers later than this.
const TIMEOUT: Duration = Duration::from_secs(1);
/// The kind's lease: a killed process's tasks are rescued about this long after.
const LEASE: Duration = Duration::from_secs(2);
/// Faults begin this long after the first enqueue.
const WARMUP: Duration = Duration::from_secs(1);
/// Requests the client has in flight.
const CLIENT_WORKERS: usize = 8;

/// What a scenario came to.
pub enum Outcome {
    /// It ran: the row, and what the faults were (`10 SIGKILL`).
    Ran { row: Row, faults: String },
    /// It could not run here, and why (no server configured, an option the binary lacks).
    Skipped(String),
}

/// What every scenario shares.
pub struct Context {
    pub binary: PathBuf,
    pub servers: Servers,
    pub http: reqwest::Client,
    /// Keep each scenario's directory (logs, delivery log, SQLite file) instead of deleting it.
    pub keep: bool,
}

/// Runs one scenario.
pub async fn run(s: &Scenario, ctx: &Context) -> anyhow::Result<Outcome> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("chaos-{}-", s.name))
        .tempdir()?;
    let db = match Database::new(s.backend, &ctx.servers, dir.path()) {
        Ok(db) => db,
        Err(e) => return Ok(Outcome::Skipped(format!("{e:#}"))),
    };
    if let Fault::DiskFull { .. } = s.fault
        && let Some(why) = page_limit_unsupported(ctx, &dir.path().join("probe.db")).await?
    {
        return Ok(Outcome::Skipped(why));
    }
    let result = run_on(s, ctx, &db, dir.path().to_path_buf()).await;
    db.drop_all().await;
    if ctx.keep {
        let kept = dir.keep();
        eprintln!("chaos: {} kept in {}", s.name, kept.display());
    }
    result
}

async fn run_on(
    s: &Scenario,
    ctx: &Context,
    db: &Database,
    dir: PathBuf,
) -> anyhow::Result<Outcome> {
    let log = dir.join("deliveries.log");
    let target = Target::start(&log).await?;
    let config = FleetConfig {
        binary: ctx.binary.clone(),
        target: target.base.clone(),
        timeout: TIMEOUT,
        lease: LEASE,
    };
    let mut fleet = Fleet::new(&dir, s.processes, &config)?;
    let limit = match s.fault {
        Fault::DiskFull { max_page_count, .. } => Some(max_page_count),
        _ => None,
    };
    fleet.start(&db.url(limit), &ctx.http).await?;
    // A misbehaving target misbehaves from now, through the warm-up and as long as it lasts.
    let bad_until = now_ms() + (WARMUP + lasting(&s.fault)).as_millis() as u64;
    match s.fault {
        Fault::SlowTarget { .. } => target.behave(Behaviour::Slow {
            delay: TIMEOUT + Duration::from_millis(500),
            until_ms: bad_until,
        }),
        Fault::RecoveringTarget { .. } => target.behave(Behaviour::Failing {
            until_ms: bad_until,
        }),
        _ => {}
    }

    // The client enqueues over the span while the fault happens; it keeps retrying a key
    // until long after the last fault could have ended.
    let client_deadline = Instant::now() + s.span + s.recovery_limit;
    let failed_tries = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let client = tokio::spawn(client::enqueue_all(
        ctx.http.clone(),
        fleet.bases(),
        s.tasks,
        s.span,
        CLIENT_WORKERS,
        client_deadline,
        failed_tries.clone(),
    ));
    tokio::time::sleep(WARMUP).await;
    let (faults, last_fault_ms) = match &s.fault {
        Fault::SlowTarget { lasting } | Fault::RecoveringTarget { lasting } => {
            let wait = bad_until.saturating_sub(now_ms());
            tokio::time::sleep(Duration::from_millis(wait)).await;
            let what = match s.fault {
                Fault::SlowTarget { .. } => "slow",
                _ => "503",
            };
            (format!("{what} {}s", lasting.as_secs()), bad_until)
        }
        fault => inject(fault, &mut fleet, db, &ctx.http, &failed_tries).await?,
    };

    let acks: Acks = client.await.context("the client panicked")?;
    // Every acknowledged key delivered, or the recovery deadline.
    let deadline = Instant::now()
        + s.recovery_limit.saturating_sub(Duration::from_millis(
            now_ms().saturating_sub(last_fault_ms),
        ));
    while Instant::now() < deadline && !acks.ids.keys().all(|k| target.has(k)) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Late redeliveries (or a second task for a key) would show up now.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The verdict reads the log from disk; what it lacks, the ledger is asked about.
    let deliveries = target::read_log(&target.path)?;
    let logged: HashSet<&str> = deliveries
        .iter()
        .filter(|d| (200..300).contains(&d.status))
        .map(|d| d.key.as_str())
        .collect();
    let mut ledger = HashMap::new();
    for (key, id) in &acks.ids {
        if !logged.contains(key.as_str()) {
            ledger.insert(id.clone(), ask_ledger(&ctx.http, &fleet, id).await);
        }
    }
    let mut exits = Vec::new();
    for (i, p) in fleet.processes.iter_mut().enumerate() {
        if let Some(status) = p.exited() {
            exits.push(format!(
                "process {i} ended by itself ({status}): {}",
                p.log_tail()
            ));
        }
    }
    fleet.stop().await;
    target.stop();
    let mut row = verdict::judge(
        &acks.ids,
        &acks.acked_at,
        acks.unacknowledged.len(),
        &deliveries,
        &ledger,
        last_fault_ms,
    );
    for (key, why) in acks.refused.iter().take(3) {
        row.examples.push(format!("refused: {key}: {why}"));
    }
    row.unacknowledged += acks.refused.len();
    row.examples.extend(exits);
    Ok(Outcome::Ran { row, faults })
}

/// How long a target fault lasts.
fn lasting(f: &Fault) -> Duration {
    match f {
        Fault::SlowTarget { lasting } | Fault::RecoveringTarget { lasting } => *lasting,
        _ => Duration::ZERO,
    }
}

/// Runs a process or database fault; returns what it did and when it ended (Unix ms).
async fn inject(
    fault: &Fault,
    fleet: &mut Fleet,
    db: &Database,
    http: &reqwest::Client,
    failed_tries: &std::sync::atomic::AtomicU64,
) -> anyhow::Result<(String, u64)> {
    match fault {
        Fault::Kills { count, every } => {
            for _ in 0..*count {
                let pause = rand::random_range(every.0.as_millis()..=every.1.as_millis());
                tokio::time::sleep(Duration::from_millis(pause as u64)).await;
                let i = rand::random_range(0..fleet.processes.len());
                let p = &mut fleet.processes[i];
                p.kill().await?;
                tokio::time::sleep(Duration::from_millis(rand::random_range(0..300))).await;
                p.restart()?;
            }
            let at = now_ms();
            Ok((format!("{count} SIGKILL"), at))
        }
        Fault::BackendKills { rounds, every } => {
            let mut killed = 0;
            for _ in 0..*rounds {
                tokio::time::sleep(*every).await;
                let db = db.clone();
                killed += tokio::task::spawn_blocking(move || db.kill_backends()).await??;
            }
            if killed == 0 {
                bail!("pg_terminate_backend found none of backstop's connections");
            }
            Ok((format!("{rounds}x kill, {killed} conns"), now_ms()))
        }
        Fault::Restarts { count, every } => {
            for _ in 0..*count {
                tokio::time::sleep(*every).await;
                tokio::task::spawn_blocking(database::restart_postgres).await??;
            }
            Ok((format!("{count} PG restart"), now_ms()))
        }
        Fault::DiskFull { full_for, .. } => {
            // Full once enqueues start failing.
            let since = Instant::now();
            while failed_tries.load(std::sync::atomic::Ordering::Relaxed) == 0 {
                if since.elapsed() > Duration::from_secs(60) {
                    bail!("the ledger never filled up: lower max_page_count");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tokio::time::sleep(*full_for).await;
            for p in &mut fleet.processes {
                p.kill().await?;
                p.start(&db.url(None))?;
                p.ready(http, Duration::from_secs(30)).await?;
            }
            Ok((format!("full {}s", full_for.as_secs()), now_ms()))
        }
        Fault::SlowTarget { .. } | Fault::RecoveringTarget { .. } => {
            unreachable!("target faults are the target's behaviour")
        }
    }
}

/// The ledger's status of task `id`, from any process that answers.
async fn ask_ledger(http: &reqwest::Client, fleet: &Fleet, id: &str) -> LedgerStatus {
    let mut last = String::from("no process answered");
    for _ in 0..20 {
        for base in fleet.bases() {
            match http.get(format!("{base}/v1/tasks/{id}")).send().await {
                Ok(r) if r.status() == reqwest::StatusCode::NOT_FOUND => {
                    return LedgerStatus::Absent;
                }
                Ok(r) if r.status().is_success() => {
                    let v: serde_json::Value =
                        serde_json::from_str(&r.text().await.unwrap_or_default())
                            .unwrap_or_default();
                    let status = v["status"].as_str().unwrap_or("").to_string();
                    return match status.as_str() {
                        "succeeded" => LedgerStatus::Succeeded,
                        "failed" | "compensated" => LedgerStatus::Ended(status),
                        _ => LedgerStatus::Unfinished(status),
                    };
                }
                Ok(r) => last = format!("HTTP {}", r.status()),
                Err(e) => last = e.to_string(),
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    LedgerStatus::Unknown(last)
}

/// `Some(reason)` when the binary refuses a SQLite URL with `max_page_count`.
async fn page_limit_unsupported(
    ctx: &Context,
    probe: &std::path::Path,
) -> anyhow::Result<Option<String>> {
    let url = format!("sqlite://{}?max_page_count=100000", probe.display());
    let out = tokio::process::Command::new(&ctx.binary)
        .args(["migrate", "--database", &url])
        .env_remove("BACKSTOP_DATABASE_URL")
        .env_remove("BACKSTOP_CONFIG")
        .output()
        .await
        .with_context(|| format!("cannot run {}", ctx.binary.display()))?;
    if out.status.success() {
        return Ok(None);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Ok(Some(format!(
        "this backstop does not take `?max_page_count=N` on a sqlite: URL ({})",
        err.lines().last().unwrap_or("").trim()
    )))
}
