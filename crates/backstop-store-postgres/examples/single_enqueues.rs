//! Times single-task enqueues from many concurrent callers (each call one task, as
//! `POST /v1/tasks` makes them), on a fresh schema dropped at the end. Run with
//! `BACKSTOP_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test cargo run --release -p backstop-store-postgres --example single_enqueues`
//! (`SINGLE_ENQUEUES_N` tasks, 20,000 by default; `SINGLE_ENQUEUES_CALLERS`, 32).

use backstop_core::store::*;
use backstop_core::*;
use backstop_store_postgres::ScratchSchema;
use jiff::Timestamp;
use std::time::Instant;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let url = std::env::var("BACKSTOP_TEST_POSTGRES_URL")
        .expect("set BACKSTOP_TEST_POSTGRES_URL, e.g. postgres://postgres@127.0.0.1:5432/test");
    let n = env("SINGLE_ENQUEUES_N", 20_000);
    let callers = env("SINGLE_ENQUEUES_CALLERS", 32);
    let scratch = ScratchSchema::new(&url, "single_enqueues").unwrap();
    let store = scratch.open().await.unwrap();
    let t = Instant::now();
    let handles: Vec<_> = (0..callers)
        .map(|c| {
            let s = store.clone();
            tokio::spawn(async move {
                for i in (c..n).step_by(callers) {
                    let now = Timestamp::now();
                    let task = NewTask {
                        id: TaskId::new(),
                        kind: "k".into(),
                        key: format!("single-{i}"),
                        payload: br#"{"n":1}"#.to_vec(),
                        max_attempts: 8,
                        run_at: now,
                        expires_at: None,
                        traceparent: None,
                        intake: Default::default(),
                        origin: None,
                        group: None,
                    };
                    let r = s
                        .enqueue(EnqueueParams {
                            tasks: vec![task],
                            now,
                        })
                        .await
                        .unwrap();
                    assert!(matches!(r[..], [EnqueueResult::Created(_)]));
                }
            })
        })
        .collect();
    for h in handles {
        h.await.unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "single enqueues from {callers} callers: {n} in {secs:.2} s = {:.0} tasks/s",
        n as f64 / secs
    );
    let counts = store
        .counts(CountsParams {
            kind: Some("k".into()),
        })
        .await
        .unwrap();
    assert_eq!(counts.pending as usize, n, "every enqueue is in the ledger");
    store.close().await;
    scratch.drop_all().await.unwrap();
}
