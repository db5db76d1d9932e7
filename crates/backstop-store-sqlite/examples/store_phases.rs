//! Times the three row writes of a task on their own: enqueue, claim and complete of 100,000
//! tasks in batches, on a fresh file with the default durability. Run with
//! `cargo run --release -p backstop-store-sqlite --example store_phases`.
//!
//! Besides wall-clock rates it prints the CPU time the SQLite worker threads spent per task
//! (from `/proc`, on Linux): on a shared machine that figure is far steadier than the rates.

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
    let n = 100_000;
    let now = jiff::Timestamp::now();
    let (t, cpu) = (Instant::now(), sqlite_cpu());
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
            })
            .collect();
        s.enqueue(EnqueueParams { tasks, now }).await.unwrap();
    }
    report("enqueue", n, t, cpu);
    let (t, cpu) = (Instant::now(), sqlite_cpu());
    let mut claimed = Vec::new();
    loop {
        let c = s
            .claim(ClaimParams {
                kind: "k".into(),
                limit: 1024,
                owner: "w".into(),
                now,
                lease_until: now + jiff::SignedDuration::from_secs(60),
            })
            .await
            .unwrap();
        if c.is_empty() {
            break;
        }
        claimed.extend(c);
    }
    report("claim", n, t, cpu);
    let (t, cpu) = (Instant::now(), sqlite_cpu());
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
                started_at: now,
                ended_at: now,
                worker: "w".into(),
            })
            .collect();
        s.complete(CompleteParams { completions, now })
            .await
            .unwrap();
    }
    report("complete", n, t, cpu);
}

fn report(phase: &str, n: usize, started: Instant, cpu_before: u64) {
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{phase:<8} {:>7.0} tasks/s  {:>5.2} µs sqlite-thread CPU/task",
        n as f64 / secs,
        (sqlite_cpu() - cpu_before) as f64 / 1000.0 / n as f64
    );
}

/// Nanoseconds of CPU the sqlx SQLite worker threads have run so far (0 where `/proc` has
/// no schedstat).
fn sqlite_cpu() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.starts_with("sqlx-sqlite"))
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}
