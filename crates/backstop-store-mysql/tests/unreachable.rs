//! The server gone after open: a prompt `StoreError::Unavailable` for writes and for the write
//! probe, and recovery when the server is back. "Gone" is a TCP proxy on loopback that the
//! test closes, so the shared server keeps running. Uses the server of
//! `BACKSTOP_TEST_MYSQL_URL` (without it, the case says `skipped:` and passes).

mod common;

use backstop_core::StoreError;
use backstop_core::store::EnqueueParams;
use backstop_core::store::{Enqueue, Migrations};
use backstop_store_mysql::{ACQUIRE_TIMEOUT, MysqlStore};
use backstop_store_tests::proxy::Proxy;
use backstop_store_tests::{t0, task};
use common::{PrefixGuard, skip};
use std::time::{Duration, Instant};

fn one(key: &str) -> EnqueueParams {
    EnqueueParams {
        tasks: vec![task("k", key, "{}")],
        now: t0(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_gone_after_open_is_unavailable_promptly_and_comes_back() {
    if skip() {
        return;
    }
    let guard = PrefixGuard::new();
    let mut opts = guard.options();
    // mysql://user@HOST:PORT/db…
    let authority = opts.url["mysql://".len()..].split('/').next().unwrap();
    let server = authority.rsplit('@').next().unwrap().to_string();
    assert!(
        server.contains(':'),
        "the test URL names a port: {}",
        opts.url
    );
    let proxy = Proxy::start("127.0.0.1:0", &server).await;
    let via = proxy.addr;
    opts.url = opts.url.replacen(&server, &via.to_string(), 1);
    let store = MysqlStore::open_with(opts).await.expect("open via proxy");
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
