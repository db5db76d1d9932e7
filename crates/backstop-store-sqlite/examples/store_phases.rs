//! Times the three row writes of a task on their own: enqueue, claim and complete of 100,000
//! tasks in batches, on a fresh file with the default durability. Run with
//! `cargo run --release -p backstop-store-sqlite --example store_phases`.
//!
//! Besides wall-clock rates it prints the CPU time spent per task (from `/proc`, on Linux): on a
//! shared machine that figure is far steadier than the rates. Most of it is the single writer's
//! work, which bounds the throughput of the whole system.

use backstop_core::store::*;
use backstop_core::*;
use backstop_store_sqlite::SqliteStore;
use std::time::Instant;

#[tokio::main]
async fn main() {
    let _ = std::fs::remove_file("/tmp/store_phases.db");
    let s = SqliteStore::open("sqlite:///tmp/store_phases.db")
        .await
        .unwrap();
    // A smaller run (`STORE_PHASES_N=20000`) suits slow tools such as callgrind.
    let n: usize = std::env::var("STORE_PHASES_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let now = jiff::Timestamp::now();
    let (t, before) = (Instant::now(), cpu());
    for b in 0..n / 1000 {
        let tasks = (0..1000)
            .map(|i| NewTask {
                id: TaskId::new(),
                kind: "k".into(),
                key: format!("k{b}-{i}"),
                payload: br#"{"n":1}"#.to_vec(),
                max_attempts: 8,
                run_at: now,
                expires_at: None,
                traceparent: None,
                intake: Default::default(),
                origin: None,
                group: None,
            })
            .collect();
        s.enqueue(EnqueueParams { tasks, now }).await.unwrap();
    }
    report("enqueue", n, t, before);
    let (t, before) = (Instant::now(), cpu());
    let mut claimed = Vec::new();
    loop {
        let c = s
            .claim(ClaimParams {
                kind: "k".into(),
                limit: 1024,
                start: 1024,
                owner: "w".into(),
                now,
                lease_until: now + jiff::SignedDuration::from_secs(60),
                max_attempts: 8,
                on_group_failure: Default::default(),
                per_key: None,
            })
            .await
            .unwrap();
        if c.is_empty() {
            break;
        }
        claimed.extend(c);
    }
    report("claim", n, t, before);
    let (t, before) = (Instant::now(), cpu());
    for chunk in claimed.chunks(4096) {
        let completions = chunk
            .iter()
            .map(|c| Completion {
                lease: LeaseRef {
                    id: c.id,
                    epoch: c.epoch,
                },
                attempt: 1,
                status: Status::Succeeded,
                run_at: None,
                last_error: None,
                reason: None,
                outcome: AttemptOutcome::Succeeded,
                http_status: None,
                note: None,
                started_at: now,
                ended_at: now,
                worker: "w".into(),
            })
            .collect();
        s.complete(CompleteParams {
            completions,
            starts: None,
            claims: Vec::new(),
            now,
        })
        .await
        .unwrap();
    }
    report("complete", n, t, before);
}

#[inline(never)]
fn report(phase: &str, n: usize, started: Instant, before: Cpu) {
    let secs = started.elapsed().as_secs_f64();
    let now = cpu();
    let per_task = |ns: u64| ns as f64 / 1000.0 / n as f64;
    println!(
        "{phase:<8} {:>7.0} tasks/s  {:>5.2} µs CPU/task, {:>5.2} of it on sqlx's SQLite thread",
        n as f64 / secs,
        per_task(now.all - before.all),
        per_task(now.sqlx - before.sqlx),
    );
}

/// Nanoseconds of CPU run so far by all threads of the process, and by sqlx's SQLite worker
/// threads (zeros where `/proc` has no schedstat).
#[derive(Clone, Copy)]
struct Cpu {
    all: u64,
    sqlx: u64,
}

fn cpu() -> Cpu {
    let mut c = Cpu { all: 0, sqlx: 0 };
    for t in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let Some(ns) = std::fs::read_to_string(t.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        else {
            continue;
        };
        c.all += ns;
        if std::fs::read_to_string(t.path().join("comm"))
            .is_ok_and(|n| n.starts_with("sqlx-sqlite"))
        {
            c.sqlx += ns;
        }
    }
    c
}
