//! Times the three row writes of a task on their own: enqueue, claim and complete of 100,000
//! tasks in batches, on a fresh file with the default durability. Run with
//! `cargo run --release -p backstop-store-sqlite --example store_phases`.

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
    let t = Instant::now();
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
    println!(
        "enqueue {:?} {:.0}/s",
        t.elapsed(),
        n as f64 / t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
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
    println!(
        "claim {:?} {:.0}/s",
        t.elapsed(),
        n as f64 / t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
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
    println!(
        "complete {:?} {:.0}/s",
        t.elapsed(),
        n as f64 / t.elapsed().as_secs_f64()
    );
}
