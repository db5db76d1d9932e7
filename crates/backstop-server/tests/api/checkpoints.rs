//! Checkpoints of pull leases: a cursor saved under a lease reaches the next lease; a zombie's
//! checkpoint is refused and recorded; a resumable release spends no attempt.

use crate::harness::{Api, Setup, task};
use serde_json::{Value, json};
use std::time::Duration;

async fn lease_one(api: &Api, worker: &str, lease: &str) -> Value {
    let (s, got) = api
        .post(
            "/v1/leases",
            json!({"kinds": ["report.render"], "worker": worker, "lease": lease, "wait": "5s"}),
        )
        .await;
    assert_eq!(s, 200, "{got}");
    let tasks = got["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{got}");
    tasks[0].clone()
}

/// POSTs JSON to an endpoint that answers `204` with no body; returns the status and the
/// answer (a problem document when refused).
async fn send(api: &Api, path: &str, body: Value) -> (u16, Value) {
    let (s, _, text) = api
        .raw(
            reqwest::Method::POST,
            path,
            body.to_string().into_bytes(),
            &[("content-type", "application/json")],
        )
        .await;
    (s, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn token(t: &Value) -> String {
    t["token"].as_str().unwrap().to_string()
}

async fn events(api: &Api, id: &str) -> Vec<Value> {
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    t["events"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_reaches_the_next_lease_and_a_zombies_is_refused() {
    let api = Api::start(Setup {
        manual_clock: true,
        ..Setup::default()
    })
    .await;
    let clock = api.clock.clone().unwrap();
    let (_, e) = api
        .post(
            "/v1/tasks",
            task("report.render", "big", json!({"items": 100000})),
        )
        .await;
    let id = e["id"].as_str().unwrap().to_string();
    let first = lease_one(&api, "slow", "5s").await;
    assert_eq!(
        first["checkpoint"],
        Value::Null,
        "nothing saved yet: {first}"
    );
    let zombie = token(&first);
    let at = |t: &str| format!("/v1/leases/{t}/checkpoint");
    let (s, p) = send(&api, &at(&zombie), json!({"cursor": {"offset": 1000}})).await;
    assert_eq!(s, 204, "{p}");

    // The slow worker's lease runs out; the task is rescued and leased again, with the cursor.
    clock.advance(Duration::from_secs(6));
    let second = lease_one(&api, "fast", "30s").await;
    assert_eq!(second["attempt"], 2);
    assert_eq!(second["checkpoint"], json!({"offset": 1000}), "{second}");
    let live = token(&second);
    let (s, _) = send(&api, &at(&live), json!({"cursor": {"offset": 5000}})).await;
    assert_eq!(s, 204);

    // The zombie wakes and writes an older cursor: refused, and on the timeline.
    let (s, p) = send(&api, &at(&zombie), json!({"cursor": {"offset": 2000}})).await;
    assert_eq!(s, 409, "{p}");
    assert_eq!(p["type"], "urn:backstop:problem:lease-lost");
    let rejected: Vec<Value> = events(&api, &id)
        .await
        .into_iter()
        .filter(|e| e["type"] == "checkpoint_rejected")
        .collect();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0]["attempt"], 1);
    assert_eq!(rejected[0]["worker"], "pull:slow");

    // The live attempt gives the task back resumable: no attempt spent, cursor kept.
    let (s, p) = send(
        &api,
        &format!("/v1/leases/{live}/release"),
        json!({"suspend": true}),
    )
    .await;
    assert_eq!(s, 204, "{p}");
    let third = lease_one(&api, "fast", "30s").await;
    assert_eq!(
        third["attempt"], 2,
        "the suspended attempt was not counted: {third}"
    );
    assert_eq!(third["checkpoint"], json!({"offset": 5000}));
    let (s, done) = api
        .post(
            &format!("/v1/leases/{}/complete", token(&third)),
            json!({"outcome": "succeeded"}),
        )
        .await;
    assert_eq!((s, done["status"].as_str()), (200, Some("succeeded")));
    let types: Vec<String> = events(&api, &id)
        .await
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    assert!(types.contains(&"suspended".to_string()), "{types:?}");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_with_a_cursor_saves_it_and_spends_no_attempt() {
    let api = Api::start(Setup::default()).await;
    api.post("/v1/tasks", task("report.render", "r", json!({})))
        .await;
    let first = lease_one(&api, "w", "30s").await;
    let (s, p) = send(
        &api,
        &format!("/v1/leases/{}/release", token(&first)),
        json!({"cursor": [1, "two", {"three": 3}]}),
    )
    .await;
    assert_eq!(s, 204, "{p}");
    let again = lease_one(&api, "w", "30s").await;
    assert_eq!(again["attempt"], 1);
    assert_eq!(again["checkpoint"], json!([1, "two", {"three": 3}]));
    // A plain release still counts the attempt (interrupted).
    let (s, _, _) = api
        .raw(
            reqwest::Method::POST,
            &format!("/v1/leases/{}/release", token(&again)),
            Vec::new(),
            &[],
        )
        .await;
    assert_eq!(s, 204);
    let third = lease_one(&api, "w", "30s").await;
    assert_eq!(third["attempt"], 2);
    assert_eq!(
        third["checkpoint"],
        json!([1, "two", {"three": 3}]),
        "a cursor outlives attempts"
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_checkpoints_get_a_clear_4xx_and_change_nothing() {
    let api = Api::start(Setup::default()).await;
    api.post("/v1/tasks", task("report.render", "c", json!({})))
        .await;
    let t = lease_one(&api, "w", "30s").await;
    let at = format!("/v1/leases/{}/checkpoint", token(&t));
    let (s, p) = send(&api, &at, json!({})).await;
    assert_eq!(s, 422, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("cursor"), "{p}");
    let (s, p) = send(&api, &at, json!({"cursor": 1, "extra": 2})).await;
    assert_eq!(s, 422, "{p}");
    let big = "x".repeat(70 * 1024);
    let (s, p) = send(&api, &at, json!({"cursor": big})).await;
    assert!(s == 422 || s == 413, "{s} {p}");
    assert!(p["detail"].as_str().is_some(), "{p}");
    let (s, p) = send(
        &api,
        "/v1/leases/not-a-token/checkpoint",
        json!({"cursor": 1}),
    )
    .await;
    assert_eq!(s, 404, "{p}");
    // None of it was saved: the task is released and leased again with no cursor.
    let (s, _, _) = api
        .raw(
            reqwest::Method::POST,
            &format!("/v1/leases/{}/release", token(&t)),
            Vec::new(),
            &[],
        )
        .await;
    assert_eq!(s, 204);
    let again = lease_one(&api, "w", "30s").await;
    assert_eq!(again["checkpoint"], Value::Null, "{again}");
    api.stop().await;
}
