//! `backstop serve` with its HTTP API: the API's task JSON is the CLI's, a pull worker drives a
//! task to its end over HTTP, an acknowledged API enqueue survives SIGKILL, and an
//! unauthenticated API is never exposed beyond loopback.

mod common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;

const CONFIG: &str = "[engine]\nrescue_interval = \"100ms\"\n\
    [kinds.\"report.render\"]\ntarget = \"pull\"\nmax_attempts = 2\n";

async fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_worker_drives_a_task_over_http_and_the_cli_sees_the_same_json() {
    let w = Workdir::new(CONFIG);
    let mut serve = w.serve();
    let base = w.api_base().await;
    let (s, e) = post(
        &base,
        "/v1/tasks",
        json!({"kind": "report.render", "key": "q-1", "payload": {"quarter": 3}}),
    )
    .await;
    assert_eq!(s, 201, "{e}");
    let id = e["id"].as_str().unwrap().to_string();
    let (_, got) = post(
        &base,
        "/v1/leases",
        json!({"kinds": ["report.render"], "worker": "py-1", "wait": "5s"}),
    )
    .await;
    let token = got["tasks"][0]["token"].as_str().unwrap().to_string();
    let (s, done) = post(
        &base,
        &format!("/v1/leases/{token}/complete"),
        json!({"outcome": "succeeded"}),
    )
    .await;
    assert_eq!((s, done["status"].as_str()), (200, Some("succeeded")));

    let api: Value = reqwest::get(format!("{base}/v1/tasks/{id}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cli = w.json(&["tasks", "show", &id, "--json"]).await;
    assert_eq!(
        api, cli,
        "one JSON shape for a task, over HTTP and on the CLI"
    );
    assert_eq!(api["status"], "succeeded");
    signal(&serve, libc::SIGTERM);
    let status = tokio::time::timeout(Duration::from_secs(10), serve.wait())
        .await
        .expect("serve stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{}", w.serve_log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_api_enqueue_survives_sigkill() {
    let w = Workdir::new(CONFIG);
    let serve = w.serve();
    let base = w.api_base().await;
    // Enqueue from several connections until the kill; keep every acknowledged id.
    let mut producers = Vec::new();
    for p in 0..4 {
        let base = base.clone();
        producers.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut acked = Vec::new();
            for i in 0.. {
                let body = json!({"kind": "report.render", "key": format!("p{p}-{i}"), "payload": {"i": i}});
                match client.post(format!("{base}/v1/tasks")).json(&body).send().await {
                    Ok(r) if r.status().as_u16() == 201 => {
                        let v: Value = match r.json().await {
                            Ok(v) => v,
                            Err(_) => break,
                        };
                        acked.push(v["id"].as_str().unwrap().to_string());
                    }
                    _ => break,
                }
            }
            acked
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    signal(&serve, libc::SIGKILL);
    let mut acked = Vec::new();
    for p in producers {
        acked.extend(p.await.unwrap());
    }
    assert!(
        acked.len() > 20,
        "the producers were acknowledged before the kill: {}",
        acked.len()
    );
    assert!(acked.len() < 10_000, "one listing page holds them all");
    drop(serve);
    // Every acknowledged task is in the ledger after the crash.
    let listed = w
        .json(&[
            "tasks",
            "list",
            "--kind",
            "report.render",
            "--limit",
            "10000",
            "--json",
        ])
        .await;
    let ids: std::collections::HashSet<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    for id in &acked {
        assert!(ids.contains(id.as_str()), "acknowledged task {id} was lost");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_an_unauthenticated_api_beyond_loopback() {
    let w = Workdir::new(CONFIG);
    let (ok, _, err) = w.run(&["serve", "--listen", "0.0.0.0:0"]).await;
    assert!(!ok);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("beyond loopback") && err.contains("api.tokens"),
        "{err}"
    );
}
