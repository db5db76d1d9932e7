//! `/v1/limits`: overriding one key's limits at run time, audited, and what a bad request gets.

use crate::harness::{Api, Setup, task};
use serde_json::{Value, json};

async fn send(api: &Api, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
    let (status, ctype, text) = api
        .raw(
            method,
            path,
            serde_json::to_vec(&body).unwrap(),
            &[("content-type", "application/json")],
        )
        .await;
    crate::harness::decode(status, &ctype, &text)
}

async fn limited() -> Api {
    let mut kind = crate::harness::pull("report.render");
    kind.concurrency_limit = Some(backstop_core::limit::ConcurrencyLimit {
        key: "/tenant".into(),
        max: 1,
        missing_key: Default::default(),
    });
    Api::start(Setup {
        kinds: vec![kind, crate::harness::pull("plain")],
        ..Setup::default()
    })
    .await
}

async fn lease_keys(api: &Api, worker: &str) -> Vec<String> {
    let (s, got) = api
        .post(
            "/v1/leases",
            json!({"kinds": ["report.render"], "worker": worker, "max": 10}),
        )
        .await;
    assert_eq!(s, 200, "{got}");
    let mut keys: Vec<String> = got["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap().to_string())
        .collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_raises_one_keys_max_and_is_kept_in_its_history() {
    let api = limited().await;
    for key in ["a1", "a2", "a3", "b1", "b2"] {
        let (s, e) = api
            .post(
                "/v1/tasks",
                task("report.render", key, json!({"tenant": &key[..1]})),
            )
            .await;
        assert_eq!(s, 201, "{e}");
    }
    let (s, v) = send(
        &api,
        reqwest::Method::PUT,
        "/v1/limits/report.render/keys/a",
        json!({"max": 2, "reason": "tenant a bought more"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["concurrency"], json!({"key": "/tenant", "max": 2}), "{v}");
    assert_eq!(v["override"]["max"], 2, "{v}");
    assert_eq!(v["override"]["reason"], "tenant a bought more");
    assert!(!v["override"]["by"].as_str().unwrap().is_empty(), "{v}");
    // The next lease follows it: two of a, the kind's one of b.
    assert_eq!(lease_keys(&api, "w1").await, ["a1", "a2", "b1"]);

    let (s, kind) = api.get("/v1/limits/report.render").await;
    assert_eq!(s, 200, "{kind}");
    let (_, kinds) = api.get("/v1/kinds").await;
    let listed = kinds["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "report.render")
        .unwrap();
    assert_eq!(
        listed["limits"],
        json!({"concurrency": {"key": "/tenant", "max": 1, "missing_key": "reject"}}),
        "the kinds listing shows the configured limit: {listed}"
    );
    assert_eq!(kind["concurrency"]["max"], 1, "the kind's own: {kind}");
    assert_eq!(kind["overrides"].as_array().unwrap().len(), 1, "{kind}");

    let (s, v) = send(
        &api,
        reqwest::Method::DELETE,
        "/v1/limits/report.render/keys/a",
        json!({"reason": "back to the plan"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["concurrency"]["max"], 1, "{v}");
    assert!(v.get("override").is_none(), "{v}");
    let actions: Vec<&str> = v["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["clear", "set"], "{v}");
    assert_eq!(v["history"][0]["reason"], "back to the plan");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_overrides_are_refused_with_a_reason_and_change_nothing() {
    let api = limited().await;
    let put = reqwest::Method::PUT;
    for (path, body, status, says) in [
        (
            "/v1/limits/nope/keys/a",
            json!({"max": 2, "reason": "r"}),
            404,
            "no kind named \"nope\"",
        ),
        (
            "/v1/limits/plain/keys/a",
            json!({"max": 2, "reason": "r"}),
            409,
            "has no limits per key",
        ),
        (
            "/v1/limits/report.render/keys/a",
            json!({"max": 0, "reason": "r"}),
            422,
            "max 0 would never let a task of the key run",
        ),
        (
            "/v1/limits/report.render/keys/a",
            json!({"max": 2}),
            422,
            "a reason is required",
        ),
        (
            "/v1/limits/report.render/keys/a",
            json!({"reason": "r"}),
            422,
            "give `max`, `rate` or both",
        ),
        (
            "/v1/limits/report.render/keys/a",
            json!({"rate": {"limit": 5}, "reason": "r"}),
            409,
            "has no limits.rate",
        ),
        (
            "/v1/limits/report.render/keys/a",
            json!({"rate": {"limit": 5, "period": "soon"}, "reason": "r"}),
            422,
            "rate.period",
        ),
    ] {
        let (s, p) = send(&api, put.clone(), path, body.clone()).await;
        assert_eq!(s, status, "{body}: {p}");
        assert!(
            p["detail"].as_str().unwrap_or_default().contains(says),
            "{body}: {p}"
        );
    }
    let long = format!("/v1/limits/report.render/keys/{}", "k".repeat(513));
    let (s, p) = send(&api, put, &long, json!({"max": 2, "reason": "r"})).await;
    assert_eq!(s, 422, "{p}");
    let (s, p) = send(
        &api,
        reqwest::Method::DELETE,
        "/v1/limits/report.render/keys/a",
        json!({"reason": "r"}),
    )
    .await;
    assert_eq!(s, 404, "nothing to clear: {p}");
    let (_, kind) = api.get("/v1/limits/report.render").await;
    assert_eq!(kind["overrides"], json!([]), "nothing changed: {kind}");
    let (_, key) = api.get("/v1/limits/report.render/keys/a").await;
    assert_eq!(key["history"], json!([]), "nothing recorded: {key}");
    api.stop().await;
}

/// `GET /v1/kinds` shows each kind's breakers: its own and its target host's, with the kinds
/// that share the host's count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kinds_listing_shows_a_hosts_breaker_and_its_kinds() {
    let mut a = crate::harness::push("stock.sync");
    let mut b = crate::harness::push("order.ship");
    let host = backstop_core::breaker::HostBreaker {
        host: "127.0.0.1:9".into(),
        kinds: vec!["order.ship".into(), "stock.sync".into()],
        config: backstop_core::breaker::BreakerConfig::new(5, std::time::Duration::from_secs(10)),
    };
    a.host_breaker = Some(host.clone());
    b.host_breaker = Some(host);
    b.breaker = Some(backstop_core::breaker::BreakerConfig::new(
        20,
        std::time::Duration::from_secs(30),
    ));
    let api = Api::start(Setup {
        kinds: vec![a, b, crate::harness::pull("plain")],
        ..Setup::default()
    })
    .await;
    let (s, kinds) = api.get("/v1/kinds").await;
    assert_eq!(s, 200, "{kinds}");
    let of = |name: &str| {
        kinds["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        of("stock.sync")["breaker"],
        json!({"host": {"host": "127.0.0.1:9", "kinds": ["order.ship", "stock.sync"],
            "failures": 5, "cool_down": "10s", "max_cool_down": "320s", "probes": 1}}),
    );
    let ship = of("order.ship");
    assert_eq!(ship["breaker"]["kind"]["failures"], 20, "{ship}");
    assert_eq!(ship["breaker"]["host"]["failures"], 5, "{ship}");
    assert!(of("plain").get("breaker").is_none());
    api.stop().await;
}
