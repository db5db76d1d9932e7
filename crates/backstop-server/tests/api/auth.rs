//! Bearer tokens: required when configured, compared by hash, named on the timeline.

use crate::harness::{Api, Setup, task};
use backstop_server::ApiToken;
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_configured_every_api_call_needs_one_and_actions_name_it() {
    let mut api = Api::start(Setup {
        tokens: vec![
            ApiToken::from_secret("ops-team", "bst_ops_secret"),
            ApiToken::from_secret("billing", "bst_billing_secret"),
        ],
        ..Setup::default()
    })
    .await;
    for (method, path) in [
        (Method::POST, "/v1/tasks"),
        (Method::POST, "/v1/tasks/batch"),
        (Method::GET, "/v1/tasks"),
        (Method::POST, "/v1/leases"),
        (Method::GET, "/v1/kinds"),
        (Method::POST, "/v1/entities/order/1/transitions"),
        (Method::GET, "/v1/entities/order/1"),
        (Method::GET, "/metrics"),
    ] {
        let (s, ctype, text) = api.raw(method.clone(), path, b"{}".to_vec(), &[]).await;
        assert_eq!(s, 401, "{method} {path}: {text}");
        assert_eq!(ctype, "application/problem+json");
    }
    let resp = api
        .client
        .get(format!("{}/v1/kinds", api.base))
        .bearer_auth("bst_ops_secre")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    // Probes and the document stay open.
    for path in ["/healthz", "/readyz", "/openapi.json"] {
        let (s, _, _) = api.raw(Method::GET, path, Vec::new(), &[]).await;
        assert_eq!(s, 200, "{path}");
    }
    assert_eq!(api.task_count().await, 0);

    api.token = Some("bst_billing_secret".into());
    let mut later = task("sms.send", "a-1", json!({}));
    later["delay"] = json!("1h");
    let (s, e) = api.post("/v1/tasks", later).await;
    assert_eq!(s, 201, "{e}");
    let id = e["id"].as_str().unwrap();
    let (s, _) = api.post(&format!("/v1/tasks/{id}/cancel"), json!({})).await;
    assert_eq!(s, 200);
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    let ev = t["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(ev["type"], "canceled");
    assert_eq!(ev["actor"], "billing", "the token's name is recorded: {ev}");
    api.stop().await;
}
