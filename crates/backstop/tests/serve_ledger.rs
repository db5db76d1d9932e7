//! `backstop serve` refuses, in one line and with a non-zero exit, a ledger it cannot write.

mod common;

use common::*;
use std::process::Stdio;
use std::time::Duration;

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
