//! The server away: at open, the driver's reason at once; after open, a prompt
//! `StoreError::Unavailable` for writes and for the write probe, and recovery when the server
//! is back. "Away after open" is a TCP proxy on loopback that the test closes, so the shared
//! server keeps running. The first case needs no server; the second one uses the server of
//! `BACKSTOP_TEST_POSTGRES_URL` (without it, it says `skipped:` and passes).

mod common;

use backstop_core::store::EnqueueParams;
use backstop_core::store::{Enqueue, Migrations};
use backstop_core::{NewTask, StoreError, TaskId};
use backstop_store_postgres::{ACQUIRE_TIMEOUT, PostgresStore};
use backstop_store_tests::proxy::Proxy;
use common::{SchemaGuard, skip};
use jiff::Timestamp;
use sqlx::postgres::PgConnectOptions;
use std::str::FromStr;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_refused_connection_is_reported_at_once() {
    // Nothing listens on port 1 of loopback.
    let started = Instant::now();
    let e = PostgresStore::open("postgres://postgres@127.0.0.1:1/test")
        .await
        .err()
        .expect("no server there");
    let took = started.elapsed();
    assert!(
        e.to_string().to_lowercase().contains("connection refused"),
        "{e}"
    );
    assert!(took < Duration::from_secs(2), "took {took:?}: {e}");
}

fn one(key: &str) -> EnqueueParams {
    EnqueueParams {
        tasks: vec![NewTask {
            id: TaskId::new(),
            kind: "k".into(),
            key: key.into(),
            payload: b"{}".to_vec(),
            max_attempts: 3,
            run_at: Timestamp::now(),
            expires_at: None,
            traceparent: None,
            intake: Default::default(),
            origin: None,
            group: None,
        }],
        now: Timestamp::now(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_gone_after_open_is_unavailable_promptly_and_comes_back() {
    if skip() {
        return;
    }
    let guard = SchemaGuard::new();
    let mut opts = guard.options();
    let direct = PgConnectOptions::from_str(&opts.url).unwrap();
    let server = format!("{}:{}", direct.get_host(), direct.get_port());
    assert!(opts.url.contains(&server), "{}", opts.url);
    let proxy = Proxy::start("127.0.0.1:0", &server).await;
    let via = proxy.addr;
    opts.url = opts.url.replacen(&server, &via.to_string(), 1);
    let store = PostgresStore::open_with(opts)
        .await
        .expect("open via proxy");
    store.enqueue(one("before")).await.expect("enqueue");
    store.check_writable().await.expect("writable");

    proxy.stop().await;
    let deadline = ACQUIRE_TIMEOUT + Duration::from_secs(3);
    let started = Instant::now();
    let e = store.enqueue(one("while-away")).await.unwrap_err();
    let took = started.elapsed();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e}");
    assert!(took < deadline, "enqueue answered after {took:?}: {e}");
    let started = Instant::now();
    let e = store.check_writable().await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e}");
    assert!(started.elapsed() < deadline, "{:?}", started.elapsed());
    eprintln!("while away: enqueue answered in {took:?}: {e}");

    // Back on the same port: the same store writes again.
    let proxy = Proxy::start(&via.to_string(), &server).await;
    store.enqueue(one("after")).await.expect("enqueue after");
    store.check_writable().await.expect("writable after");
    proxy.stop().await;
}
