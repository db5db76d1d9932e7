//! Pausing a kind by hand through the binary: `backstop kinds pause` in one process stops a
//! running `serve` from leasing the kind (its tasks stay pending, no attempt spent); the API's
//! resume lets them out; `kinds show` and `GET /v1/kinds/{kind}/pause` tell the history with
//! who and why; bad input is one line or a problem document, and changes nothing.

mod common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;

const CONFIG: &str = "[engine]\npause_watch = \"100ms\"\n\
    [kinds.\"report.render\"]\ntarget = \"pull\"\n\
    [kinds.\"report.mail\"]\ntarget = \"pull\"\npaused = true\n";

async fn call(method: reqwest::Method, url: String, body: Option<Value>) -> (u16, Value) {
    let mut r = reqwest::Client::new().request(method, url);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn lease(base: &str) -> usize {
    let (s, got) = call(
        reqwest::Method::POST,
        format!("{base}/v1/leases"),
        Some(json!({"kinds": ["report.render"], "worker": "py-1", "max": 10})),
    )
    .await;
    assert_eq!(s, 200, "{got}");
    got["tasks"].as_array().unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_paused_from_the_cli_leases_nothing_until_the_api_resumes_it() {
    let w = Workdir::new(CONFIG);
    let mut serve = w.serve();
    let base = w.api_base().await;
    w.ok(&[
        "kinds",
        "pause",
        "report.render",
        "--reason",
        "warehouse maintenance",
    ])
    .await;
    // serve reads the pause within its watch interval.
    wait_for(
        Duration::from_secs(10),
        "serve sees the pause",
        async || {
            let (_, kinds) = call(reqwest::Method::GET, format!("{base}/v1/kinds"), None).await;
            let k = kinds["kinds"]
                .as_array()
                .unwrap()
                .iter()
                .find(|k| k["name"] == "report.render")
                .cloned()
                .unwrap();
            (k["dispatch"] == "paused").then_some(())
        },
    )
    .await;
    for n in 0..3 {
        w.ok(&[
            "enqueue",
            "report.render",
            &format!("q-{n}"),
            "--payload",
            "{}",
        ])
        .await;
    }
    assert_eq!(lease(&base).await, 0, "nothing is leased while paused");
    let shown = w.ok(&["kinds", "show", "report.render"]).await;
    assert!(
        shown.starts_with("report.render: paused (manual: warehouse maintenance; by cli)"),
        "{shown}"
    );

    let (s, v) = call(
        reqwest::Method::POST,
        format!("{base}/v1/kinds/report.render/resume"),
        Some(json!({"reason": "maintenance over"})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["state"], "open");
    assert_eq!(lease(&base).await, 3, "every task is leased once resumed");
    let (_, v) = call(
        reqwest::Method::GET,
        format!("{base}/v1/kinds/report.render/pause"),
        None,
    )
    .await;
    let h = v["history"].as_array().unwrap();
    assert_eq!(h.len(), 2, "{v}");
    assert_eq!(
        (&h[0]["action"], &h[0]["reason"]),
        (&json!("resume"), &json!("maintenance over"))
    );
    assert_eq!(
        (&h[1]["action"], &h[1]["reason"], &h[1]["by"]),
        (
            &json!("pause"),
            &json!("warehouse maintenance"),
            &json!("cli")
        )
    );
    for t in w
        .json(&["tasks", "list", "--kind", "report.render", "--json"])
        .await
        .as_array()
        .unwrap()
    {
        assert_eq!(t["attempts"], 1, "the pause spent no attempt: {t}");
    }

    // Bad input: one line, or a problem document; nothing changes.
    let (ok, _, err) = w
        .run(&["kinds", "pause", "report.rendr", "--reason", "x"])
        .await;
    assert!(!ok);
    assert!(
        err.contains("no kind named \"report.rendr\" (configured: report.mail, report.render)"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (ok, _, err) = w
        .run(&["kinds", "pause", "report.render", "--reason", " "])
        .await;
    assert!(!ok);
    assert!(err.contains("a reason is required"), "{err}");
    let (s, p) = call(
        reqwest::Method::POST,
        format!("{base}/v1/kinds/report.render/pause"),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("a reason is required"),
        "{p}"
    );
    let (s, p) = call(
        reqwest::Method::POST,
        format!("{base}/v1/kinds/report.mail/resume"),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("paused in the configuration"),
        "{p}"
    );
    let (s, _) = call(
        reqwest::Method::POST,
        format!("{base}/v1/kinds/nope/pause"),
        Some(json!({"reason": "x"})),
    )
    .await;
    assert_eq!(s, 404);
    let (_, v) = call(
        reqwest::Method::GET,
        format!("{base}/v1/kinds/report.render/pause"),
        None,
    )
    .await;
    assert_eq!(v["state"], "open", "the refusals changed nothing: {v}");
    assert_eq!(v["history"].as_array().unwrap().len(), 2);

    signal(&serve, libc::SIGTERM);
    serve.wait().await.unwrap();
}
