//! Reading, listing, and the manual actions: retry, resolve, cancel.

use crate::harness::{Api, Setup, decode, task};
use serde_json::{Value, json};

/// Enqueues a pull task and fails it through a lease: a dead letter.
async fn dead_letter(api: &Api, key: &str) -> String {
    let (_, e) = api
        .post("/v1/tasks", task("report.render", key, json!({})))
        .await;
    let (_, got) = api
        .post(
            "/v1/leases",
            json!({"kinds": ["report.render"], "worker": "w", "max": 1}),
        )
        .await;
    let tok = got["tasks"][0]["token"].as_str().unwrap();
    api.post(
        &format!("/v1/leases/{tok}/complete"),
        json!({"outcome": "failed", "error": "nope"}),
    )
    .await;
    e["id"].as_str().unwrap().to_string()
}

fn last_event(t: &Value) -> Value {
    t["events"].as_array().unwrap().last().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_returns_the_task_with_its_timeline_or_404() {
    let api = Api::start(Setup::default()).await;
    let (_, e) = api
        .post("/v1/tasks", task("sms.send", "s-1", json!({"a": 1})))
        .await;
    let (s, t) = api
        .get(&format!("/v1/tasks/{}", e["id"].as_str().unwrap()))
        .await;
    assert_eq!(s, 200);
    assert_eq!(t["id"], e["id"]);
    assert_eq!(t["events"][0]["type"], "created");
    let (s, p) = api
        .get("/v1/tasks/0192f0c0-0000-7000-8000-000000000000")
        .await;
    assert_eq!(s, 404, "{p}");
    let (s, p) = api.get("/v1/tasks/not-a-uuid").await;
    assert_eq!(s, 404, "{p}");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_filters_and_pages_newest_first() {
    let api = Api::start(Setup::default()).await;
    let mut ids = Vec::new();
    for i in 0..7 {
        let (_, e) = api
            .post("/v1/tasks", task("sms.send", &format!("l-{i}"), json!({})))
            .await;
        ids.push(e["id"].as_str().unwrap().to_string());
    }
    api.post("/v1/tasks", task("report.render", "l-0", json!({})))
        .await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("/v1/tasks?kind=sms.send&limit=3&cursor={c}"),
            None => "/v1/tasks?kind=sms.send&limit=3".into(),
        };
        let (s, page) = api.get(&q).await;
        assert_eq!(s, 200, "{page}");
        for t in page["tasks"].as_array().unwrap() {
            assert_eq!(t["kind"], "sms.send");
            assert!(t.get("events").is_none());
            seen.push(t["id"].as_str().unwrap().to_string());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    ids.reverse();
    assert_eq!(seen, ids, "every task once, newest first");
    let (_, by_key) = api.get("/v1/tasks?key=l-0").await;
    assert_eq!(by_key["tasks"].as_array().unwrap().len(), 2);
    let (_, pending) = api.get("/v1/tasks?status=pending&kind=report.render").await;
    assert_eq!(pending["tasks"].as_array().unwrap().len(), 1);
    for (q, says) in [
        ("status=lost", "status"),
        ("limit=0", "limit"),
        ("limit=100000", "between 1 and 1000 (api.max_list)"),
        ("limit=-1", "limit"),
        ("cursor=zzz", "cursor"),
        ("limit=ten", "limit"),
        ("limit=", "limit"),
        ("colour=red", "unknown field"),
    ] {
        let (s, p) = api.get(&format!("/v1/tasks?{q}")).await;
        assert_eq!(s, 422, "{q}: {p}");
        assert!(p["detail"].as_str().unwrap().contains(says), "{q}: {p}");
    }
    // Every limit names the setting that raises it.
    let (s, p) = api.get("/v1/hooks/any/requests?limit=100000").await;
    assert_eq!(s, 422, "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("(api.max_list)"),
        "{p}"
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_is_retried_with_a_renewed_budget_or_resolved_with_a_reason() {
    let api = Api::start(Setup::default()).await;
    let id = dead_letter(&api, "d-1").await;
    let id2 = dead_letter(&api, "d-2").await;
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(t["status"], "failed");

    let (s, p) = api.post(&format!("/v1/tasks/{id}/cancel"), json!({})).await;
    assert_eq!(s, 409, "only pending tasks are canceled: {p}");
    let (s, p) = api
        .post(&format!("/v1/tasks/{id}/resolve"), json!({}))
        .await;
    assert_eq!(s, 422, "resolve needs a reason: {p}");

    let (s, t) = api.post(&format!("/v1/tasks/{id}/retry"), json!(7)).await;
    assert_eq!(s, 422, "a number is not a reason: {t}");
    // serde would read a struct from an array; the schema says object (a fuzzer's find).
    let (s, t) = api
        .post(&format!("/v1/tasks/{id}/retry"), json!([null]))
        .await;
    assert_eq!(s, 422, "an array is not a body object: {t}");
    assert!(t["detail"].as_str().unwrap().contains("object"), "{t}");
    let (s, _, text) = api
        .raw(
            reqwest::Method::POST,
            &format!("/v1/tasks/{id}/retry"),
            Vec::new(),
            &[],
        )
        .await;
    assert_eq!(
        s, 415,
        "a bodiless POST is a browser's simple request: {text}"
    );
    let (s, _, text) = api
        .raw(
            reqwest::Method::POST,
            &format!("/v1/tasks/{id}/retry"),
            Vec::new(),
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(s, 200, "an empty body is fine: {text}");
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(t["status"], "pending");
    assert_eq!(
        t["max_attempts"].as_u64().unwrap(),
        t["attempts"].as_u64().unwrap() + 3
    );
    let ev = last_event(&t);
    assert_eq!(
        (ev["type"].as_str(), ev["actor"].as_str()),
        (Some("retried"), Some("api"))
    );

    let (s, p) = api
        .post(
            &format!("/v1/tasks/{id}/resolve"),
            json!({"reason": "refunded by hand"}),
        )
        .await;
    assert_eq!(s, 409, "a pending task is not a dead letter: {p}");

    let (s, t) = api
        .post(
            &format!("/v1/tasks/{id2}/resolve"),
            json!({"reason": "refunded by hand"}),
        )
        .await;
    assert_eq!(s, 200, "{t}");
    assert_eq!(t["status"], "compensated");
    let (_, t) = api.get(&format!("/v1/tasks/{id2}")).await;
    let ev = last_event(&t);
    assert_eq!(ev["type"], "resolved");
    assert_eq!(ev["reason"], "refunded by hand");

    let (s, p) = api
        .post(
            "/v1/tasks/0192f0c0-0000-7000-8000-000000000000/retry",
            json!({}),
        )
        .await;
    assert_eq!(s, 404, "{p}");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_task_is_canceled() {
    let api = Api::start(Setup::default()).await;
    let mut later = task("sms.send", "c-1", json!({}));
    later["delay"] = json!("1h");
    let (_, e) = api.post("/v1/tasks", later).await;
    let id = e["id"].as_str().unwrap();
    let (s, t) = api.post(&format!("/v1/tasks/{id}/cancel"), json!({})).await;
    assert_eq!(s, 200, "{t}");
    assert_eq!(t["status"], "compensated");
    assert_eq!(t["reason"], "canceled");
    let (s, p) = api.post(&format!("/v1/tasks/{id}/cancel"), json!({})).await;
    assert_eq!(s, 409, "{p}");
    api.stop().await;
}

/// An optional body may be left out, but a body sent as JSON must be JSON: one of nothing but
/// whitespace is malformed, not an absent body, and changes nothing (found by the API fuzzer,
/// on `POST /v1/kinds/{kind}/resume` with a body of `\r`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_optional_body_of_only_whitespace_is_malformed_json() {
    let api = Api::start(Setup::default()).await;
    let mut later = task("sms.send", "c-ws", json!({}));
    later["delay"] = json!("1h");
    let (_, e) = api.post("/v1/tasks", later).await;
    let id = e["id"].as_str().unwrap();
    for body in [&b"\r"[..], b" \n\t "] {
        let (status, ctype, text) = api
            .raw(
                reqwest::Method::POST,
                &format!("/v1/tasks/{id}/cancel"),
                body.to_vec(),
                &[("content-type", "application/json")],
            )
            .await;
        let (s, p) = decode(status, &ctype, &text);
        assert_eq!(s, 400, "{p}");
        assert!(p["detail"].as_str().unwrap().contains("JSON"), "{p}");
    }
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(t["status"], "pending", "nothing was canceled: {t}");
    // No body at all still means the defaults.
    let (status, ctype, text) = api
        .raw(
            reqwest::Method::POST,
            &format!("/v1/tasks/{id}/cancel"),
            Vec::new(),
            &[("content-type", "application/json")],
        )
        .await;
    let (s, t) = decode(status, &ctype, &text);
    assert_eq!((s, t["status"].as_str()), (200, Some("compensated")), "{t}");
    api.stop().await;
}
