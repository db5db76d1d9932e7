//! Guarded state transitions over HTTP: the four answers, the history, the errors, and many
//! callbacks about one entity at once.

use crate::harness::{Api, Setup};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::HashMap;

const ORDER: &str = "/v1/entities/order";

async fn send(api: &Api, id: &str, body: Value) -> Value {
    let (s, v) = api.post(&format!("{ORDER}/{id}/transitions"), body).await;
    assert_eq!(s, 200, "{v}");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_four_answers_and_the_history() {
    let api = Api::start(Setup::default()).await;
    let paid = send(
        &api,
        "1001",
        json!({"to": "paid", "event_id": "evt_1", "version": 1}),
    )
    .await;
    assert_eq!(paid["answer"], "applied");
    assert_eq!(paid["state"], "paid");
    assert_eq!(paid["version"], 1);
    assert_eq!(paid["entity"]["machine"], "order");
    assert_eq!(paid["entity"]["id"], "1001");
    assert_eq!(paid["entity"]["decisions"], 1);
    assert_eq!(paid["detail"], "order \"1001\" moved from pending to paid");

    let dup = send(
        &api,
        "1001",
        json!({"to": "paid", "event_id": "evt_1", "version": 1}),
    )
    .await;
    assert_eq!(dup["answer"], "duplicate");
    assert_eq!(dup["state"], "paid");

    let rejected = send(&api, "1001", json!({"to": "closed", "event_id": "evt_2"})).await;
    assert_eq!(rejected["answer"], "rejected");
    assert_eq!(rejected["state"], "paid", "the current state is returned");
    assert_eq!(
        rejected["detail"],
        "order \"1001\" is paid; closed may follow only pending, so nothing changed"
    );

    send(
        &api,
        "1001",
        json!({"to": "refunding", "event_id": "evt_3", "version": 3}),
    )
    .await;
    let stale = send(
        &api,
        "1001",
        json!({"to": "refunded", "event_id": "evt_4", "version": 2}),
    )
    .await;
    assert_eq!(stale["answer"], "stale");
    assert_eq!(stale["state"], "refunding");
    assert_eq!(stale["version"], 3);
    assert!(
        stale["detail"]
            .as_str()
            .unwrap()
            .starts_with("version 2 is not newer than version 3"),
        "{stale}"
    );

    let (s, h) = api.get(&format!("{ORDER}/1001")).await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["state"], "refunding");
    assert_eq!(h["version"], 3);
    let history = h["history"].as_array().unwrap();
    let answers: Vec<&str> = history
        .iter()
        .map(|d| d["answer"].as_str().unwrap())
        .collect();
    assert_eq!(
        answers,
        ["applied", "duplicate", "rejected", "applied", "stale"]
    );
    assert_eq!(history[2]["event_id"], "evt_2");
    assert_eq!(history[2]["from"], "paid");
    assert_eq!(history[2]["to"], "closed");
    assert_eq!(history[2]["version"], Value::Null);
    assert!(history[2]["at"].as_str().unwrap().ends_with('Z'));
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_paid_after_refunding_is_rejected_and_changes_nothing() {
    let api = Api::start(Setup::default()).await;
    send(&api, "77", json!({"to": "paid", "event_id": "pay"})).await;
    send(&api, "77", json!({"to": "refunding", "event_id": "refund"})).await;
    let (_, before) = api.get(&format!("{ORDER}/77")).await;
    let same = send(&api, "77", json!({"to": "paid", "event_id": "pay"})).await;
    assert_eq!(same["answer"], "duplicate");
    let again = send(&api, "77", json!({"to": "paid", "event_id": "pay-resent"})).await;
    assert_eq!(again["answer"], "rejected");
    assert_eq!(again["state"], "refunding");
    let (_, after) = api.get(&format!("{ORDER}/77")).await;
    assert_eq!(after["state"], "refunding");
    assert_eq!(after["updated_at"], before["updated_at"]);
    assert_eq!(after["history"].as_array().unwrap().len(), 4);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_machines_and_states_and_bad_fields_are_problems() {
    let api = Api::start(Setup::default()).await;
    let t = |id: &str| format!("{ORDER}/{id}/transitions");
    let (s, p) = api
        .post(
            "/v1/entities/refund/1/transitions",
            json!({"to": "paid", "event_id": "e"}),
        )
        .await;
    assert_eq!(
        (s, p["type"].as_str()),
        (404, Some("urn:backstop:problem:unknown-machine"))
    );
    let (s, p) = api
        .post(&t("1"), json!({"to": "shipped", "event_id": "e"}))
        .await;
    assert_eq!(
        (s, p["type"].as_str()),
        (422, Some("urn:backstop:problem:unknown-state"))
    );
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("closed, paid, pending"),
        "{p}"
    );
    for body in [
        json!({"to": "paid"}),
        json!({"to": "paid", "event_id": ""}),
        json!({"to": "paid", "event_id": "e".repeat(256)}),
        json!({"to": "paid", "event_id": "a\u{7}b"}),
        json!({"to": "paid", "event_id": "e", "version": "3"}),
        json!({"to": "paid", "event_id": "e", "version": 1.5}),
        json!({"to": "paid", "event_id": "e", "state": "x"}),
    ] {
        let (s, p) = api.post(&t("1"), body.clone()).await;
        assert_eq!(s, 422, "{body}: {p}");
        assert_eq!(p["type"], "urn:backstop:problem:invalid", "{body}");
    }
    let long_id = "i".repeat(513);
    let (s, p) = api
        .post(&t(&long_id), json!({"to": "paid", "event_id": "e"}))
        .await;
    assert_eq!(s, 422, "{p}");
    let (s, ctype, _) = api
        .raw(
            Method::POST,
            &t("1"),
            b"{nope".to_vec(),
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!((s, ctype.as_str()), (400, "application/problem+json"));
    let (s, p) = api.get(&format!("{ORDER}/1")).await;
    assert_eq!(
        (s, p["type"].as_str()),
        (404, Some("urn:backstop:problem:not-found"))
    );
    assert!(
        p["detail"].as_str().unwrap().contains("ever requested"),
        "{p}"
    );
    let (s, p) = api.get(&format!("{ORDER}/%FF")).await;
    assert_eq!(
        (s, p["type"].as_str()),
        (400, Some("urn:backstop:problem:bad-request"))
    );
    let (s, p) = api.get("/v1/entities/refund/1").await;
    assert_eq!(
        (s, p["type"].as_str()),
        (404, Some("urn:backstop:problem:unknown-machine"))
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_travel_percent_encoded_in_the_path() {
    let api = Api::start(Setup::default()).await;
    let v = send(
        &api,
        "order%2F12%20b%C3%A9",
        json!({"to": "paid", "event_id": "e"}),
    )
    .await;
    assert_eq!(v["entity"]["id"], "order/12 bé");
    let (s, h) = api.get("/v1/entities/order/order%2F12%20b%C3%A9").await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["id"], "order/12 bé");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_callbacks_on_one_order_apply_each_event_once() {
    let api = std::sync::Arc::new(Api::start(Setup::default()).await);
    // 25 callbacks, each delivered twice, all at once: "paid" and then "refunding" or
    // "refunded" in any order, and closings that come too late.
    let targets = ["paid", "refunding", "refunded", "closed", "paid"];
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(50));
    let calls: Vec<_> = (0..50)
        .map(|i| {
            let (api, start) = (api.clone(), start.clone());
            let event = i / 2;
            let body =
                json!({"to": targets[event % targets.len()], "event_id": format!("cb-{event}")});
            tokio::spawn(async move {
                start.wait().await;
                let (s, v) = api.post(&format!("{ORDER}/o-1/transitions"), body).await;
                assert_eq!(s, 200, "{v}");
                v
            })
        })
        .collect();
    let mut counts = Vec::new();
    for c in calls {
        let v = c.await.unwrap();
        counts.push(v["entity"]["decisions"].as_u64().unwrap());
    }
    counts.sort();
    assert_eq!(
        counts,
        (1..=50).collect::<Vec<u64>>(),
        "decided one at a time"
    );
    let (_, h) = api.get(&format!("{ORDER}/o-1")).await;
    let history = h["history"].as_array().unwrap();
    assert_eq!(history.len(), 50);
    let mut state = "pending".to_string();
    let mut applied: HashMap<String, usize> = HashMap::new();
    for d in history {
        assert_eq!(d["from"], state.as_str(), "{d}");
        if d["answer"] == "applied" {
            *applied
                .entry(d["event_id"].as_str().unwrap().into())
                .or_default() += 1;
            state = d["to"].as_str().unwrap().into();
        }
    }
    assert_eq!(h["state"], state.as_str());
    assert!(!applied.is_empty(), "the first paid or closed applies");
    assert!(applied.values().all(|n| *n == 1), "{applied:?}");
    std::sync::Arc::into_inner(api).unwrap().stop().await;
}
