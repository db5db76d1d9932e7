//! Wake-ups on PostgreSQL: an engine that polls only every 30 s starts work created by another
//! process (another store's enqueue, an application's outbox insert) within milliseconds,
//! through LISTEN/NOTIFY; a killed listener reconnects by itself; and with no notifications at
//! all, polling still delivers. Each case on a fresh schema of the server named by
//! `BACKSTOP_TEST_POSTGRES_URL`; without it, each case says `skipped:` and passes.

mod common;
mod rig;

use backstop_core::store::Enqueue;
use backstop_core::store::EnqueueParams;
use backstop_core::{KindConfig, NewTask, Store, Target, TaskId};
use backstop_engine::EngineOptions;
use common::skip;
use jiff::Timestamp;
use rig::{KIND, Rig, admin, percentiles};
use sqlx::AssertSqlSafe;
use std::time::{Duration, Instant};

/// The bound the issue sets for a wake-up; typical ones take a few milliseconds.
const PROMPT: Duration = Duration::from_millis(500);

fn polling_every(poll: Duration) -> EngineOptions {
    EngineOptions {
        poll_interval: poll,
        ..EngineOptions::default()
    }
}

async fn idle_engine(poll: Duration) -> Rig {
    let rig = Rig::start(
        polling_every(poll),
        KindConfig::new(KIND, Target::InProcess),
        4,
        Duration::ZERO,
    )
    .await;
    rig.wait_for_listener(None, Duration::from_secs(10)).await;
    // The dispatcher's first claim (at start) has found nothing: it is idle now.
    tokio::time::sleep(Duration::from_millis(200)).await;
    rig
}

fn task(key: &str) -> NewTask {
    NewTask {
        id: TaskId::new(),
        kind: KIND.into(),
        key: key.into(),
        payload: b"{}".to_vec(),
        max_attempts: 3,
        run_at: Timestamp::now(),
        expires_at: None,
        traceparent: None,
        intake: Default::default(),
        origin: None,
        group: None,
    }
}

/// Enqueues `n` tasks one by one through `other`, each after the previous one started;
/// returns each one's time from the enqueue call to its start.
async fn one_by_one(rig: &mut Rig, other: &dyn Store, prefix: &str, n: usize) -> Vec<Duration> {
    let mut took = Vec::new();
    for i in 0..n {
        let key = format!("{prefix}-{i}");
        let t0 = Instant::now();
        other
            .enqueue(EnqueueParams {
                tasks: vec![task(&key)],
                now: Timestamp::now(),
            })
            .await
            .expect("enqueue");
        let s = rig.starts(1, Duration::from_secs(5)).await;
        assert_eq!(s.len(), 1, "{key} did not start within 5 s");
        assert_eq!(s[0].key, key);
        took.push(s[0].at - t0);
        // Idle again before the next one.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    took
}

fn report(what: &str, took: &[Duration]) {
    let (p50, p99, max) = percentiles(took.to_vec());
    eprintln!(
        "{what}: {} tasks, enqueue→start p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms",
        took.len()
    );
    assert!(
        took.iter().all(|t| *t < PROMPT),
        "{what}: a start took over {PROMPT:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_s_enqueue_wakes_an_idle_engine() {
    if skip() {
        return;
    }
    let mut rig = idle_engine(Duration::from_secs(30)).await;
    let other = rig.other_store().await;
    let took = one_by_one(&mut rig, &other, "other", 20).await;
    report("another store's enqueue", &took);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbox_insert_wakes_an_idle_engine() {
    if skip() {
        return;
    }
    let mut rig = idle_engine(Duration::from_secs(30)).await;
    let mut app = admin(&rig.guard).await;
    // docs/outbox.md's statement, on the test's schema.
    let insert = format!(
        "INSERT INTO {}.tasks (kind, key, payload)
         VALUES ($1, $2, convert_to($3, 'UTF8'))
         ON CONFLICT (kind, key) DO NOTHING",
        rig.guard.schema
    );
    let mut took = Vec::new();
    for i in 0..20 {
        let key = format!("outbox-{i}");
        let t0 = Instant::now();
        sqlx::query(AssertSqlSafe(insert.clone()))
            .bind(KIND)
            .bind(&key)
            .bind("{}")
            .execute(&mut app)
            .await
            .expect("outbox insert");
        let s = rig.starts(1, Duration::from_secs(5)).await;
        assert_eq!(s.len(), 1, "{key} did not start within 5 s");
        took.push(s[0].at - t0);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    report("outbox insert", &took);
    // An insert that creates nothing (the key is taken) notifies nothing, and a rolled-back
    // one neither: nothing starts.
    sqlx::query(AssertSqlSafe(insert.clone()))
        .bind(KIND)
        .bind("outbox-0")
        .bind("{}")
        .execute(&mut app)
        .await
        .expect("repeat insert");
    assert!(rig.starts(1, Duration::from_millis(300)).await.is_empty());
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_listener_reconnects_and_wake_ups_resume() {
    if skip() {
        return;
    }
    let mut rig = idle_engine(Duration::from_secs(30)).await;
    let other = rig.other_store().await;
    for round in 0..3 {
        let before = rig.wait_for_listener(None, Duration::from_secs(1)).await;
        let t0 = Instant::now();
        assert_eq!(rig.kill(" wake-ups").await, 1, "one listener to kill");
        let after = rig
            .wait_for_listener(Some(before), Duration::from_secs(10))
            .await;
        eprintln!(
            "round {round}: listener pid {before} killed, pid {after} listening {:.0} ms later",
            t0.elapsed().as_secs_f64() * 1000.0
        );
        // The reconnection wakes the dispatcher once (it may have missed work): let it idle.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let took = one_by_one(&mut rig, &other, &format!("after-kill-{round}"), 5).await;
        report("enqueue after the listener was killed", &took);
    }
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_listener_down_polling_still_delivers() {
    if skip() {
        return;
    }
    let poll = Duration::from_secs(1);
    let mut rig = idle_engine(poll).await;
    // No notification is sent any more: only polling finds work.
    let mut c = admin(&rig.guard).await;
    sqlx::raw_sql(AssertSqlSafe(format!(
        "ALTER TABLE {}.tasks DISABLE TRIGGER tasks_notify_work",
        rig.guard.schema
    )))
    .execute(&mut c)
    .await
    .expect("disable the trigger");
    let other = rig.other_store().await;
    let polled = |prefix: &'static str| {
        (0..10)
            .map(|i| task(&format!("{prefix}-{i}")))
            .collect::<Vec<_>>()
    };
    let t0 = Instant::now();
    other
        .enqueue(EnqueueParams {
            tasks: polled("silent"),
            now: Timestamp::now(),
        })
        .await
        .expect("enqueue");
    let s = rig.starts(10, poll * 3).await;
    assert_eq!(s.len(), 10, "polling delivers without notifications");
    let last = s.iter().map(|s| s.at - t0).max().expect("some");
    eprintln!(
        "no notifications: 10 tasks started within {:.0} ms (poll interval {poll:?})",
        last.as_secs_f64() * 1000.0
    );
    // And with the listener killed over and over besides.
    let killing = {
        let url = rig.guard.options().url;
        let app = rig.app.clone();
        tokio::spawn(async move {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(&url).await.expect("admin");
            loop {
                let _ = sqlx::query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE application_name = $1 || ' wake-ups'",
                )
                .bind(&app)
                .execute(&mut c)
                .await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    other
        .enqueue(EnqueueParams {
            tasks: polled("killed"),
            now: Timestamp::now(),
        })
        .await
        .expect("enqueue");
    let s = rig.starts(10, poll * 3).await;
    killing.abort();
    assert_eq!(s.len(), 10, "polling delivers with the listener down");
    rig.stop().await;
}
