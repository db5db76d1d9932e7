//! Pull leases: lease, heartbeat, complete, long polls, and fencing of stale workers.

use crate::harness::{Api, Setup, task};
use backstop_core::store::CountsParams;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn lease(api: &Api, worker: &str, extra: Value) -> (u16, Value) {
    let mut body = json!({"kinds": ["report.render"], "worker": worker, "max": 10});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    api.post("/v1/leases", body).await
}

fn tokens(v: &Value) -> Vec<String> {
    v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["token"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_leases_heartbeats_and_completes_each_outcome() {
    let api = Api::start(Setup::default()).await;
    let mut ids = Vec::new();
    for key in ["ok", "again", "bad", "skip"] {
        let (_, e) = api
            .post("/v1/tasks", task("report.render", key, json!({"k": key})))
            .await;
        ids.push(e["id"].as_str().unwrap().to_string());
    }
    let (s, got) = lease(&api, "w1", json!({"lease": "30s"})).await;
    assert_eq!(s, 200, "{got}");
    let leased = got["tasks"].as_array().unwrap();
    assert_eq!(leased.len(), 4);
    for t in leased {
        assert_eq!(t["attempt"], 1);
        assert_eq!(t["kind"], "report.render");
        assert!(t["lease_until"].as_str().is_some());
    }
    let by_key = |k: &str| {
        leased
            .iter()
            .find(|t| t["key"] == k)
            .map(|t| {
                (
                    t["token"].as_str().unwrap().to_string(),
                    t["id"].as_str().unwrap().to_string(),
                )
            })
            .unwrap()
    };
    // Nothing else is due: a second lease finds nothing at once.
    let (_, none) = lease(&api, "w2", json!({})).await;
    assert_eq!(none["tasks"], json!([]));

    let (tok, id) = by_key("ok");
    let (s, hb) = api
        .post(&format!("/v1/leases/{tok}/heartbeat"), json!(null))
        .await;
    assert_eq!(s, 200, "{hb}");
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(
        t["lease_until"], hb["lease_until"],
        "the heartbeat moved the lease"
    );
    assert_eq!(t["lease_owner"], "pull:w1");
    let (s, done) = api
        .post(
            &format!("/v1/leases/{tok}/complete"),
            json!({"outcome": "succeeded"}),
        )
        .await;
    assert_eq!(
        (s, done["status"].as_str()),
        (200, Some("succeeded")),
        "{done}"
    );

    let (tok, id) = by_key("again");
    let (s, done) = api
        .post(
            &format!("/v1/leases/{tok}/complete"),
            json!({"outcome": "retry", "error": "busy", "retry_after": "1s"}),
        )
        .await;
    assert_eq!(
        (s, done["status"].as_str()),
        (200, Some("pending")),
        "{done}"
    );
    assert!(done["run_at"].as_str().is_some());
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(t["last_error"], "busy");

    let (tok, id) = by_key("bad");
    let (_, done) = api
        .post(
            &format!("/v1/leases/{tok}/complete"),
            json!({"outcome": "failed", "error": "card declined"}),
        )
        .await;
    assert_eq!(done["status"], "failed");
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(t["status"], "failed");
    assert_eq!(t["last_error"], "card declined");
    let attempt = t["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "attempt")
        .unwrap();
    assert_eq!(attempt["worker"], "pull:w1");
    assert_eq!(attempt["outcome"], "failed");

    let (tok, id) = by_key("skip");
    let (_, done) = api
        .post(
            &format!("/v1/leases/{tok}/complete"),
            json!({"outcome": "skip", "reason": "order closed"}),
        )
        .await;
    assert_eq!(done["status"], "compensated");
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(t["reason"], "order closed");

    // The retried task comes back after its delay, as attempt 2.
    let (_, back) = lease(&api, "w2", json!({"wait": "5s"})).await;
    let back = back["tasks"].as_array().unwrap();
    assert_eq!(back.len(), 1, "{back:?}");
    assert_eq!(back[0]["key"], "again");
    assert_eq!(back[0]["attempt"], 2);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_lease_expired_cannot_complete_and_the_task_runs_again() {
    let api = Api::start(Setup {
        manual_clock: true,
        ..Setup::default()
    })
    .await;
    let clock = api.clock.clone().unwrap();
    let (_, e) = api
        .post("/v1/tasks", task("report.render", "slow", json!({})))
        .await;
    let id = e["id"].as_str().unwrap().to_string();
    let (_, first) = lease(&api, "slow-worker", json!({"lease": "5s"})).await;
    let old = tokens(&first).pop().unwrap();

    // The slow worker's lease runs out; the reconciler's rescue puts the task back.
    clock.advance(Duration::from_secs(6));
    let (_, second) = lease(&api, "fast-worker", json!({"wait": "5s"})).await;
    let second = second["tasks"].as_array().unwrap().clone();
    assert_eq!(second.len(), 1, "the task is leased again after rescue");
    assert_eq!(second[0]["attempt"], 2);
    let new = second[0]["token"].as_str().unwrap().to_string();

    let (s, p) = api
        .post(&format!("/v1/leases/{old}/heartbeat"), json!(null))
        .await;
    assert_eq!(s, 409, "{p}");
    let (s, p) = api
        .post(
            &format!("/v1/leases/{old}/complete"),
            json!({"outcome": "succeeded"}),
        )
        .await;
    assert_eq!(s, 409, "{p}");
    assert_eq!(p["type"], "urn:backstop:problem:lease-lost");
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(
        t["status"], "running",
        "the stale success was not recorded: {t}"
    );

    let (s, done) = api
        .post(
            &format!("/v1/leases/{new}/complete"),
            json!({"outcome": "succeeded"}),
        )
        .await;
    assert_eq!(
        (s, done["status"].as_str()),
        (200, Some("succeeded")),
        "{done}"
    );
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    let types: Vec<&str> = t["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(
        types.contains(&"stale_completion"),
        "the rejection is on the timeline: {types:?}"
    );
    let outcomes: Vec<&str> = t["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["outcome"].as_str())
        .collect();
    assert!(
        outcomes.contains(&"lease_expired") && outcomes.contains(&"succeeded"),
        "{outcomes:?}"
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_returns_as_soon_as_work_arrives_and_waits_out_its_time_otherwise() {
    let api = Api::start(Setup::default()).await;
    let started = Instant::now();
    let (_, none) = lease(&api, "w", json!({"wait": "1s"})).await;
    let waited = started.elapsed();
    assert_eq!(none["tasks"], json!([]));
    assert!(waited >= Duration::from_millis(950), "waited {waited:?}");
    assert!(waited < Duration::from_secs(3), "waited {waited:?}");

    let poller = {
        let body = json!({"kinds": ["report.render"], "worker": "w", "wait": "20s"});
        let req = api
            .client
            .post(format!("{}/v1/leases", api.base))
            .json(&body);
        tokio::spawn(async move {
            let t = Instant::now();
            let v: Value = req.send().await.unwrap().json().await.unwrap();
            (v, t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    api.post("/v1/tasks", task("report.render", "now", json!({})))
        .await;
    let (got, took) = poller.await.unwrap();
    assert_eq!(got["tasks"][0]["key"], "now");
    assert!(
        took < Duration::from_secs(2),
        "the enqueue woke the long poll: {took:?}"
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_a_waiting_long_poll_at_once() {
    let api = Api::start(Setup::default()).await;
    let body = json!({"kinds": ["report.render"], "worker": "w", "wait": "30s"});
    let req = api
        .client
        .post(format!("{}/v1/leases", api.base))
        .json(&body);
    let poller = tokio::spawn(async move { req.send().await.unwrap().status().as_u16() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = Instant::now();
    api.stop().await;
    assert_eq!(poller.await.unwrap(), 200);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lease_requests_get_a_clear_4xx() {
    let api = Api::start(Setup::default()).await;
    api.post("/v1/tasks", task("report.render", "k", json!({})))
        .await;
    let cases = vec![
        (
            json!({"kinds": ["sms.send"], "worker": "w"}),
            422,
            "not a pull kind",
        ),
        (
            json!({"kinds": ["nope"], "worker": "w"}),
            404,
            "unknown kind",
        ),
        (json!({"kinds": [], "worker": "w"}), 422, "at least one"),
        (
            json!({"kinds": ["report.render"], "worker": ""}),
            422,
            "worker",
        ),
        (json!({"kinds": ["report.render"]}), 422, "worker"),
        (
            json!({"kinds": ["report.render"], "worker": "w", "max": 0}),
            422,
            "max",
        ),
        (
            json!({"kinds": ["report.render"], "worker": "w", "max": 1_000_000}),
            422,
            "max_lease_tasks",
        ),
        (
            json!({"kinds": ["report.render"], "worker": "w", "wait": "1h"}),
            422,
            "wait may be at most 30s (api.max_wait)",
        ),
        (
            json!({"kinds": ["report.render"], "worker": "w", "lease": "0s"}),
            422,
            "lease",
        ),
        (
            json!({"kinds": ["report.render"], "worker": "w", "lease": "1000d"}),
            422,
            "lease may be at most 1h (api.max_lease)",
        ),
        (
            json!({"kinds": ["report.render"], "worker": "w", "extra": 1}),
            422,
            "unknown field",
        ),
    ];
    for (body, want, says) in cases {
        let (s, p) = api.post("/v1/leases", body.clone()).await;
        assert_eq!(s, want, "{body} -> {p}");
        assert!(
            p["detail"].as_str().unwrap().contains(says),
            "{p} should say {says}"
        );
    }
    // Nothing was leased by any of them.
    assert_eq!(
        api.store
            .counts(CountsParams {
                kind: Some("report.render".into())
            })
            .await
            .unwrap()
            .pending,
        1
    );
    for path in [
        "/v1/leases/garbage/heartbeat",
        "/v1/leases/garbage/complete",
    ] {
        let (s, p) = api.post(path, json!({"outcome": "succeeded"})).await;
        assert_eq!(s, 404, "{p}");
    }
    let (_, got) = lease(&api, "w", json!({})).await;
    let tok = tokens(&got).pop().unwrap();
    let (s, p) = api
        .post(
            &format!("/v1/leases/{tok}/complete"),
            json!({"outcome": "maybe"}),
        )
        .await;
    assert_eq!(s, 422, "{p}");
    let (s, p) = api
        .post(
            &format!("/v1/leases/{tok}/complete"),
            json!({"outcome": "retry", "retry_after": "later"}),
        )
        .await;
    assert_eq!(s, 422, "{p}");
    let (_, t) = api
        .get(&format!(
            "/v1/tasks/{}",
            got["tasks"][0]["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(t["status"], "running", "bad completions changed nothing");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_completion_gets_the_same_answer_and_writes_nothing() {
    let api = Api::start(Setup::default()).await;
    let (_, e) = api
        .post("/v1/tasks", task("report.render", "twice", json!({})))
        .await;
    let id = e["id"].as_str().unwrap().to_string();
    let (_, got) = lease(&api, "w", json!({})).await;
    let tok = tokens(&got).pop().unwrap();
    let path = format!("/v1/leases/{tok}/complete");
    let (s1, first) = api
        .post(&path, json!({"outcome": "failed", "error": "x"}))
        .await;
    let (_, before) = api.get(&format!("/v1/tasks/{id}")).await;
    // The first answer was lost on the way; the worker sends it again.
    let (s2, second) = api
        .post(&path, json!({"outcome": "failed", "error": "x"}))
        .await;
    assert_eq!((s1, s2), (200, 200), "{second}");
    assert_eq!(first, second);
    let (_, after) = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(before, after, "nothing was written the second time");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_must_name_its_outcome() {
    let api = Api::start(Setup::default()).await;
    let (_, e) = api
        .post("/v1/tasks", task("report.render", "silent", json!({})))
        .await;
    let id = e["id"].as_str().unwrap().to_string();
    let (_, got) = lease(&api, "w", json!({})).await;
    let tok = tokens(&got).pop().unwrap();
    let path = format!("/v1/leases/{tok}/complete");
    let json_type = [("content-type", "application/json")];
    for body in [&b""[..], b"null", b"{}"] {
        let (s, ctype, text) = api
            .raw(reqwest::Method::POST, &path, body.to_vec(), &json_type)
            .await;
        let (s, p) = crate::harness::decode(s, &ctype, &text);
        assert_eq!(s, 422, "{:?}: {p}", String::from_utf8_lossy(body));
        assert!(p["detail"].as_str().unwrap().contains("outcome"), "{p}");
    }
    // A body of only whitespace is sent, and is not JSON.
    let (s, ctype, text) = api
        .raw(reqwest::Method::POST, &path, b"  ".to_vec(), &json_type)
        .await;
    let (s, p) = crate::harness::decode(s, &ctype, &text);
    assert_eq!(s, 400, "{p}");
    let (_, t) = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(t["status"], "running", "no outcome, nothing recorded: {t}");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_completion_with_another_outcome_is_a_conflict() {
    let api = Api::start(Setup::default()).await;
    let (_, e) = api
        .post(
            "/v1/tasks",
            task("report.render", "changed-mind", json!({})),
        )
        .await;
    let id = e["id"].as_str().unwrap().to_string();
    let (_, got) = lease(&api, "w", json!({})).await;
    let tok = tokens(&got).pop().unwrap();
    let path = format!("/v1/leases/{tok}/complete");
    let (s, first) = api.post(&path, json!({"outcome": "succeeded"})).await;
    assert_eq!(s, 200, "{first}");
    let (_, before) = api.get(&format!("/v1/tasks/{id}")).await;
    for other in [
        json!({"outcome": "failed", "error": "x"}),
        json!({"outcome": "skip", "reason": "y"}),
        json!({"outcome": "retry"}),
    ] {
        let (s, p) = api.post(&path, other.clone()).await;
        assert_eq!(s, 409, "{other}: {p}");
        assert_eq!(p["type"], "urn:backstop:problem:already-completed", "{p}");
        assert!(
            p["detail"].as_str().unwrap().contains("succeeded"),
            "names the outcome on record: {p}"
        );
    }
    let (_, after) = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(before, after, "the refused outcomes wrote nothing");
    let (s, again) = api.post(&path, json!({"outcome": "succeeded"})).await;
    assert_eq!(
        (s, &again),
        (200, &first),
        "the same completion stays a 200"
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_is_due_again_at_once() {
    let api = Api::start(Setup::default()).await;
    let (_, e) = api
        .post("/v1/tasks", task("report.render", "back", json!({})))
        .await;
    let (_, got) = lease(&api, "leaving", json!({})).await;
    let tok = tokens(&got).pop().unwrap();
    let (s, _, text) = api
        .raw(
            reqwest::Method::POST,
            &format!("/v1/leases/{tok}/release"),
            Vec::new(),
            &[],
        )
        .await;
    assert_eq!(s, 204, "{text}");
    let (_, again) = lease(&api, "staying", json!({})).await;
    assert_eq!(again["tasks"][0]["id"], e["id"], "{again}");
    let (s, p) = api
        .post(&format!("/v1/leases/{tok}/release"), json!({}))
        .await;
    assert_eq!(s, 409, "{p}");
    let (_, t) = api
        .get(&format!("/v1/tasks/{}", e["id"].as_str().unwrap()))
        .await;
    let outcomes: Vec<&str> = t["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["outcome"].as_str())
        .collect();
    assert_eq!(outcomes, ["interrupted"], "{t}");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_error_is_kept_truncated_and_times_have_three_fraction_digits() {
    let api = Api::start(Setup::default()).await;
    let (_, e) = api
        .post("/v1/tasks", task("report.render", "long", json!({})))
        .await;
    let (_, got) = lease(&api, "w", json!({})).await;
    let lease_until = got["tasks"][0]["lease_until"].as_str().unwrap().to_string();
    let tok = tokens(&got).pop().unwrap();
    let trace = "é".repeat(10_000);
    let (s, done) = api
        .post(
            &format!("/v1/leases/{tok}/complete"),
            json!({"outcome": "failed", "error": trace}),
        )
        .await;
    assert_eq!(s, 200, "{done}");
    let (_, t) = api
        .get(&format!("/v1/tasks/{}", e["id"].as_str().unwrap()))
        .await;
    let err = t["last_error"].as_str().unwrap();
    assert!(
        err.len() <= 4096 && err.ends_with("[truncated]"),
        "{} bytes",
        err.len()
    );
    let fixed = |s: &str| s.len() == 24 && s.ends_with('Z') && s.as_bytes()[19] == b'.';
    assert!(fixed(&lease_until), "{lease_until}");
    for field in ["run_at", "created_at", "updated_at"] {
        assert!(fixed(t[field].as_str().unwrap()), "{field}: {}", t[field]);
    }
    for ev in t["events"].as_array().unwrap() {
        assert!(fixed(ev["at"].as_str().unwrap()), "{ev}");
    }
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_request_gets_only_tasks_whose_keys_have_a_free_slot() {
    let mut kind = crate::harness::pull("report.render");
    kind.concurrency_limit = Some(backstop_core::limit::ConcurrencyLimit {
        key: "/tenant".into(),
        max: 1,
        missing_key: Default::default(),
    });
    let api = Api::start(Setup {
        kinds: vec![kind],
        ..Setup::default()
    })
    .await;
    for (key, tenant) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        let (s, e) = api
            .post(
                "/v1/tasks",
                task("report.render", key, json!({"tenant": tenant})),
            )
            .await;
        assert_eq!(s, 201, "{e}");
    }
    let (s, got) = lease(&api, "w1", json!({"lease": "30s"})).await;
    assert_eq!(s, 200, "{got}");
    let mut keys: Vec<&str> = got["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["a1", "b1"], "one of each tenant: {got}");
    // Every tenant's slot is taken: another worker gets nothing, though a2 is due.
    let (_, none) = lease(&api, "w2", json!({})).await;
    assert_eq!(none["tasks"], json!([]), "{none}");
    api.stop().await;
}
