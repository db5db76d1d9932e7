//! `backstop serve` and its ledger: it refuses, in one line and with a non-zero exit, a ledger
//! it cannot write; while the database is away it answers promptly that it is not ready and
//! that writes should come back later, and recovers by itself.

mod common;

use backstop_store_tests::proxy::Proxy;
use common::db::{Server, TestDb};
use common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_a_ledger_that_cannot_take_writes() {
    let w = Workdir::new("");
    w.ok(&["migrate", "--database", &w.db_url()]).await;
    // The file may not grow past its size: as full as a full disk.
    let full = format!("{}?max_page_count=1", w.db_url());
    let child = tokio::process::Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--database", &full])
        .current_dir(w.path())
        .env_remove("BACKSTOP_DATABASE_URL")
        .env_remove("BACKSTOP_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(15), child.wait_with_output())
        .await
        .expect("serve exits instead of serving a full ledger")
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("cannot take writes"), "{err}");
    assert!(err.contains("full"), "{err}");
    // The same ledger without the limit serves.
    let mut ok = tokio::process::Command::new(bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database",
            &w.db_url(),
        ])
        .current_dir(w.path())
        .env_remove("BACKSTOP_DATABASE_URL")
        .env_remove("BACKSTOP_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        ok.try_wait().unwrap().is_none(),
        "serve runs on a writable ledger"
    );
    ok.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_postgres_is_away_readyz_and_writes_answer_503_promptly() {
    let Some(db) = TestDb::new(Server::Postgres) else {
        return;
    };
    let w = Workdir::new("[kinds.\"report.render\"]\ntarget = \"pull\"\n");
    // The server's address in the URL, replaced by a proxy's that the test closes.
    let url = db.url();
    let authority = url["postgres://".len()..].split('/').next().unwrap();
    let server = authority.rsplit('@').next().unwrap().to_string();
    assert!(server.contains(':'), "the test URL names a port: {url}");
    let proxy = Proxy::start("127.0.0.1:0", &server).await;
    let via = proxy.addr.to_string();
    let log = std::fs::File::create(w.path().join("serve.log")).unwrap();
    let mut child = tokio::process::Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--database"])
        .arg(url.replacen(&server, &via, 1))
        .current_dir(w.path())
        .env_remove("BACKSTOP_DATABASE_URL")
        .env_remove("BACKSTOP_CONFIG")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = w.api_base().await;
    let http = reqwest::Client::new();
    let readyz = || async {
        let started = Instant::now();
        let r = http.get(format!("{base}/readyz")).send().await.unwrap();
        (r.status().as_u16(), started.elapsed())
    };
    assert_eq!(readyz().await.0, 200);

    proxy.stop().await;
    let (status, took) = readyz().await;
    assert_eq!(status, 503);
    assert!(took < Duration::from_secs(3), "readyz took {took:?}");
    let started = Instant::now();
    let r = http
        .post(format!("{base}/v1/tasks"))
        .json(&serde_json::json!({"kind": "report.render", "key": "k1", "payload": {}}))
        .send()
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "5");
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["type"], "urn:backstop:problem:ledger-unavailable", "{v}");
    assert!(took < Duration::from_secs(8), "the enqueue took {took:?}");

    // The server is back: ready again, and the write goes through, without a restart.
    let proxy = Proxy::start(&via, &server).await;
    let back = Instant::now();
    while readyz().await.0 != 200 {
        assert!(back.elapsed() < Duration::from_secs(15), "not ready again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = http
        .post(format!("{base}/v1/tasks"))
        .json(&serde_json::json!({"kind": "report.render", "key": "k1", "payload": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    child.kill().await.unwrap();
    proxy.stop().await;
}
