//! Times the three row writes of a task on their own — enqueue, claim and complete, in
//! batches — and single-task enqueues from many callers at once, on tables of a fresh prefix
//! (dropped at the end). Run with
//! `BACKSTOP_TEST_MYSQL_URL=mysql://root@127.0.0.1:3306/test cargo run --release -p backstop-store-mysql --example store_phases`
//! (`STORE_PHASES_N` tasks, 20,000 by default).

use backstop_core::store::*;
use backstop_core::*;
use backstop_store_mysql::{MysqlStore, ScratchPrefix};
use jiff::{SignedDuration, Timestamp};
use std::time::Instant;

fn new_task(key: String, now: Timestamp) -> NewTask {
    NewTask {
        id: TaskId::new(),
        kind: "k".into(),
        key,
        payload: br#"{"n":1}"#.to_vec(),
        max_attempts: 8,
        run_at: now,
        expires_at: None,
        traceparent: None,
        intake: Default::default(),
        origin: None,
        group: None,
    }
}

fn report(phase: &str, n: usize, t: Instant) {
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{phase:>16}: {n} tasks in {secs:.2} s = {:.0} tasks/s",
        n as f64 / secs
    );
}

#[tokio::main]
async fn main() {
    let url = std::env::var("BACKSTOP_TEST_MYSQL_URL")
        .expect("set BACKSTOP_TEST_MYSQL_URL, e.g. mysql://root@127.0.0.1:3306/test");
    let n: usize = std::env::var("STORE_PHASES_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let scratch = ScratchPrefix::new(&url, "phases").unwrap();
    let mut opts = scratch.options();
    opts.max_connections = 32;
    let s = MysqlStore::open_with(opts).await.unwrap();
    let now = Timestamp::now();

    let t = Instant::now();
    for b in 0..n / 1000 {
        let tasks = (0..1000)
            .map(|i| new_task(format!("k{b}-{i}"), now))
            .collect();
        s.enqueue(EnqueueParams { tasks, now }).await.unwrap();
    }
    report("enqueue (1000)", n, t);

    let t = Instant::now();
    let mut claimed = Vec::new();
    loop {
        let c = s
            .claim(ClaimParams {
                kind: "k".into(),
                limit: 1024,
                start: 1024,
                owner: "w".into(),
                now,
                lease_until: now + SignedDuration::from_secs(60),
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
    report("claim (1024)", claimed.len(), t);

    let t = Instant::now();
    for chunk in claimed.chunks(1024) {
        let completions = chunk
            .iter()
            .map(|c| Completion {
                lease: LeaseRef {
                    id: c.id,
                    epoch: c.epoch,
                },
                attempt: c.attempt,
                status: Status::Succeeded,
                run_at: None,
                last_error: None,
                reason: None,
                outcome: AttemptOutcome::Succeeded,
                http_status: Some(200),
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
    report("complete (1024)", claimed.len(), t);

    let singles = n / 10;
    let t = Instant::now();
    let callers: Vec<_> = (0..32)
        .map(|c| {
            let s = s.clone();
            tokio::spawn(async move {
                for i in (c..singles).step_by(32) {
                    let tasks = vec![new_task(format!("single-{i}"), now)];
                    s.enqueue(EnqueueParams { tasks, now }).await.unwrap();
                }
            })
        })
        .collect();
    for c in callers {
        c.await.unwrap();
    }
    report("enqueue (1) x32", singles, t);

    s.close().await;
    scratch.drop_all().await.unwrap();
}
