//! Kinds, health, metrics, the OpenAPI document, and unknown routes.

use crate::harness::{Api, Setup, task};
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_show_policy_and_live_counts() {
    let api = Api::start(Setup::default()).await;
    api.post("/v1/tasks", task("report.render", "k-1", json!({})))
        .await;
    api.post("/v1/tasks", task("report.render", "k-2", json!({})))
        .await;
    let (s, v) = api.get("/v1/kinds").await;
    assert_eq!(s, 200);
    let kinds = v["kinds"].as_array().unwrap();
    let names: Vec<&str> = kinds.iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["report.render", "sms.send"]);
    let r = &kinds[0];
    assert_eq!(r["target"], "pull");
    assert_eq!(r["max_attempts"], 3);
    assert_eq!(r["retry"]["policy"], "schedule");
    assert_eq!(r["counts"]["pending"], 2);
    assert_eq!(r["counts"]["succeeded"], 0);
    assert_eq!(kinds[1]["target"], "push");
    assert_eq!(kinds[1]["url"], "http://127.0.0.1:9/none");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness() {
    let api = Api::start(Setup::default()).await;
    assert_eq!(api.get("/healthz").await, (200, json!({"status": "ok"})));
    assert_eq!(api.get("/readyz").await, (200, json!({"status": "ok"})));
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_ledger_is_not_ready_and_answers_503_until_space_is_back() {
    let api = Api::start(Setup::default()).await;
    // The disk fills: the file may not grow, and small enqueues fill its pages.
    api.sqlite.set_max_page_count(Some(1)).await.unwrap();
    for i in 0.. {
        let t = backstop_core::NewTask {
            id: backstop_core::TaskId::new(),
            kind: "report.render".into(),
            key: format!("f{i}"),
            payload: format!("\"{}\"", "z".repeat(4000)).into_bytes(),
            max_attempts: 3,
            run_at: jiff::Timestamp::now(),
            expires_at: None,
            traceparent: None,
            intake: Default::default(),
            origin: None,
            group: None,
        };
        let r = api
            .store
            .enqueue(backstop_core::store::EnqueueParams {
                tasks: vec![t],
                now: jiff::Timestamp::now(),
            })
            .await;
        if r.is_err() {
            break;
        }
    }
    let (s, v) = api.get("/readyz").await;
    assert_eq!(s, 503, "{v}");
    assert_eq!(v["type"], "urn:backstop:problem:not-ready");
    assert!(v["detail"].as_str().unwrap().contains("full"), "{v}");
    // A write is refused at once, as "come back later", not as an internal error.
    let body = serde_json::to_vec(&task(
        "report.render",
        "big",
        json!({"b": "y".repeat(20_000)}),
    ))
    .unwrap();
    let resp = api
        .client
        .post(format!("{}/v1/tasks", api.base))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "5");
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "urn:backstop:problem:ledger-unavailable", "{v}");
    // Space comes back: ready again, and the same write goes through.
    api.sqlite.set_max_page_count(None).await.unwrap();
    assert_eq!(api.get("/readyz").await, (200, json!({"status": "ok"})));
    let (s, v) = api
        .post(
            "/v1/tasks",
            task("report.render", "big", json!({"b": "y".repeat(20_000)})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_within_its_deadline_behind_another_writer() {
    use sqlx::Connection;
    let api = Api::start(Setup::default()).await;
    // Another process holds the file's write lock (SQLite's busy timeout is 10 s).
    let mut other = sqlx::SqliteConnection::connect(&format!("sqlite://{}", api.sqlite.path()))
        .await
        .unwrap();
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let (s, v) = api.get("/readyz").await;
    let took = started.elapsed();
    assert_eq!(s, 503, "{v}");
    assert!(
        took < std::time::Duration::from_secs(3),
        "readyz took {took:?}"
    );
    sqlx::raw_sql("ROLLBACK").execute(&mut other).await.unwrap();
    other.close().await.unwrap();
    let back = std::time::Instant::now();
    while api.get("/readyz").await.0 != 200 {
        assert!(
            back.elapsed() < std::time::Duration::from_secs(15),
            "not ready again"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_what_happened_and_pass_promtool() {
    let api = Api::start(Setup {
        kinds: vec![crate::harness::pull("metrics.kind")],
        ..Setup::default()
    })
    .await;
    api.post("/v1/tasks", task("metrics.kind", "m-1", json!({})))
        .await;
    api.post("/v1/tasks", task("metrics.kind", "m-2", json!({})))
        .await;
    let (_, got) = api
        .post(
            "/v1/leases",
            json!({"kinds": ["metrics.kind"], "worker": "w", "max": 1}),
        )
        .await;
    let tok = got["tasks"][0]["token"].as_str().unwrap();
    api.post(
        &format!("/v1/leases/{tok}/complete"),
        json!({"outcome": "succeeded"}),
    )
    .await;
    let (s, ctype, text) = api.raw(Method::GET, "/metrics", Vec::new(), &[]).await;
    assert_eq!(s, 200);
    assert!(ctype.starts_with("text/plain"), "{ctype}");
    let has = |line: &str| {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    };
    has(r#"backstop_tasks_enqueued_total{kind="metrics.kind"} 2"#);
    has(r#"backstop_attempts_total{kind="metrics.kind"} 1"#);
    has(r#"backstop_attempt_outcomes_total{kind="metrics.kind",outcome="succeeded"} 1"#);
    has(r#"backstop_tasks{kind="metrics.kind",status="pending"} 1"#);
    has(r#"backstop_tasks{kind="metrics.kind",status="succeeded"} 1"#);
    has(r#"backstop_attempt_duration_seconds_count{kind="metrics.kind"} 1"#);
    has(r#"backstop_enqueue_to_start_seconds_count{kind="metrics.kind"} 1"#);
    assert!(
        text.contains(r#"backstop_enqueue_to_start_seconds_bucket{kind="metrics.kind",le="0.1"}"#)
    );
    promtool(&text);
    api.stop().await;
}

/// Runs `promtool check metrics` on the text when promtool is installed; CI installs it and
/// sets BACKSTOP_REQUIRE_PROMTOOL=1 so that a missing promtool fails instead of skipping.
fn promtool(text: &str) {
    use std::io::Write;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var("BACKSTOP_REQUIRE_PROMTOOL").is_err(),
                "promtool is required here: {e}"
            );
            eprintln!("SKIPPED: promtool check metrics (promtool not installed: {e})");
            return;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool rejects /metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_every_endpoint() {
    let api = Api::start(Setup::default()).await;
    let (s, doc) = api.get("/openapi.json").await;
    assert_eq!(s, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/tasks", "post"),
        ("/v1/tasks", "get"),
        ("/v1/tasks/batch", "post"),
        ("/v1/tasks/{id}", "get"),
        ("/v1/tasks/{id}/retry", "post"),
        ("/v1/tasks/{id}/resolve", "post"),
        ("/v1/tasks/{id}/cancel", "post"),
        ("/v1/leases", "post"),
        ("/v1/leases/{token}/heartbeat", "post"),
        ("/v1/leases/{token}/complete", "post"),
        ("/v1/kinds", "get"),
        ("/v1/limits/{kind}", "get"),
        ("/v1/limits/{kind}/keys/{key}", "get"),
        ("/v1/limits/{kind}/keys/{key}", "put"),
        ("/v1/limits/{kind}/keys/{key}", "delete"),
        ("/v1/entities/{machine}/{id}/transitions", "post"),
        ("/v1/entities/{machine}/{id}", "get"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
    ] {
        let op = &paths[path][method];
        assert!(op.is_object(), "{method} {path} is documented");
        assert!(!op["responses"].as_object().unwrap().is_empty());
    }
    assert_eq!(
        doc,
        serde_json::to_value(backstop_server::openapi()).unwrap()
    );
    api.stop().await;
}

/// A client generated from the document must know the refusals every route shares: 503 (the
/// ledger unavailable, with Retry-After) on each route that uses the ledger, 408 (a late body)
/// on each that reads one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_lists_the_shared_refusals_on_every_route_that_can_meet_them() {
    let doc = serde_json::to_value(backstop_server::openapi()).unwrap();
    let without_ledger = ["/healthz", "/metrics"];
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            if !without_ledger.contains(&path.as_str()) {
                let r = &responses
                    .get("503")
                    .unwrap_or_else(|| panic!("{method} {path} does not document 503"));
                if path != "/readyz" && path != "/v1/hooks/{source}" {
                    assert!(
                        r["headers"]["Retry-After"].is_object(),
                        "{method} {path}: 503 without Retry-After"
                    );
                }
            }
            if op.get("requestBody").is_some() {
                assert!(
                    responses.contains_key("408"),
                    "{method} {path} reads a body but does not document 408"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 15, "only {checked} operations");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_and_methods_are_problems() {
    let api = Api::start(Setup::default()).await;
    let (s, p) = api.get("/v2/nothing").await;
    assert_eq!(s, 404, "{p}");
    let (s, ctype, _) = api.raw(Method::DELETE, "/v1/kinds", Vec::new(), &[]).await;
    assert_eq!((s, ctype.as_str()), (405, "application/problem+json"));
    api.stop().await;
}

/// Generated clients name a method after each operationId: two operations with one id clash.
#[test]
fn every_operation_has_its_own_operation_id() {
    let doc = serde_json::to_value(backstop_server::openapi()).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            if let Some(other) = seen.insert(id.to_string(), format!("{method} {path}")) {
                panic!("operationId {id:?} names both {other} and {method} {path}");
            }
        }
    }
}
