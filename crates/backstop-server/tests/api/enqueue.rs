//! POST /v1/tasks and /v1/tasks/batch: idempotency, conflicts, limits and bad input.

use crate::harness::{Api, Setup, task};
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_is_idempotent_by_kind_and_key() {
    let api = Api::start(Setup::default()).await;
    let (s, first) = api
        .post("/v1/tasks", task("sms.send", "o-1", json!({"to": "+1555"})))
        .await;
    assert_eq!(s, 201, "{first}");
    assert_eq!(first["created"], true);
    let (s, again) = api
        .post("/v1/tasks", task("sms.send", "o-1", json!({"to": "+1555"})))
        .await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["created"], false);
    assert_eq!(again["id"], first["id"]);
    let (s, conflict) = api
        .post("/v1/tasks", task("sms.send", "o-1", json!({"to": "+1666"})))
        .await;
    assert_eq!(s, 409, "{conflict}");
    assert_eq!(conflict["existing_id"], first["id"]);
    // The conflicting payload changed nothing.
    let (_, shown) = api
        .get(&format!("/v1/tasks/{}", first["id"].as_str().unwrap()))
        .await;
    assert_eq!(shown["payload"], json!({"to": "+1555"}));
    assert_eq!(api.task_count().await, 1);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_stores_every_field_and_the_traceparent() {
    let api = Api::start(Setup::default()).await;
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (s, e) = api
        .post_with(
            "/v1/tasks",
            json!({"kind": "report.render", "key": "r-1", "payload": [1, "two", {"x": null}],
                   "run_at": "2030-01-01T00:00:00Z", "expires_at": "2030-01-02T00:00:00Z",
                   "max_attempts": 7}),
            &[("traceparent", tp)],
        )
        .await;
    assert_eq!(s, 201, "{e}");
    let (_, t) = api
        .get(&format!("/v1/tasks/{}", e["id"].as_str().unwrap()))
        .await;
    assert_eq!(t["traceparent"], tp);
    assert_eq!(t["payload"], json!([1, "two", {"x": null}]));
    assert_eq!(t["max_attempts"], 7);
    assert_eq!(t["run_at"], "2030-01-01T00:00:00.000Z");
    assert_eq!(t["expires_at"], "2030-01-02T00:00:00.000Z");
    assert_eq!(t["status"], "pending");
    // A malformed traceparent is ignored, as W3C Trace Context asks.
    let (_, e) = api
        .post_with(
            "/v1/tasks",
            task("report.render", "r-2", json!({})),
            &[("traceparent", "junk")],
        )
        .await;
    let (_, t) = api
        .get(&format!("/v1/tasks/{}", e["id"].as_str().unwrap()))
        .await;
    assert!(t["traceparent"].is_null(), "{t}");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_enqueues_get_a_clear_4xx_and_change_nothing() {
    let api = Api::start(Setup {
        max_payload: 1024,
        ..Setup::default()
    })
    .await;
    let big = "x".repeat(2000);
    let cases: Vec<(serde_json::Value, u16, &str)> = vec![
        (task("nope.kind", "k", json!({})), 404, "unknown kind"),
        (
            task("sms.send", "k", json!({"blob": big})),
            413,
            "limit is 1024",
        ),
        (
            task("sms.send", "", json!({})),
            422,
            "key must not be empty",
        ),
        (
            task("sms.send", &"k".repeat(10_000), json!({})),
            422,
            "limit is 512",
        ),
        (task("sms.send", "a\u{7}b", json!({})), 422, "control"),
        (json!({"kind": "sms.send", "key": "k"}), 422, "payload"),
        (
            json!({"kind": "sms.send", "key": "k", "payload": {}, "colour": 1}),
            422,
            "unknown field",
        ),
        (
            json!({"kind": 5, "key": "k", "payload": {}}),
            422,
            "invalid type",
        ),
        (
            json!({"kind": "sms.send", "key": "k", "payload": {}, "max_attempts": 0}),
            422,
            "max_attempts",
        ),
        (
            json!({"kind": "sms.send", "key": "k", "payload": {}, "max_attempts": 1e40}),
            422,
            "max_attempts",
        ),
        (
            json!({"kind": "sms.send", "key": "k", "payload": {}, "delay": "soon"}),
            422,
            "delay",
        ),
        (
            json!({"kind": "sms.send", "key": "k", "payload": {}, "run_at": "yesterday"}),
            422,
            "run_at",
        ),
        (
            json!({"kind": "sms.send", "key": "k", "payload": {}, "run_at": "2030-01-02T00:00:00Z",
                "expires_at": "2030-01-01T00:00:00Z"}),
            422,
            "could never run",
        ),
        (json!([]), 422, "must be an object"),
    ];
    for (body, want, says) in cases {
        let (s, p) = api.post("/v1/tasks", body.clone()).await;
        assert_eq!(s, want, "{body} -> {p}");
        let detail = p["detail"].as_str().unwrap();
        assert!(
            detail.contains(says),
            "{body}: {detail:?} should say {says:?}"
        );
    }
    let raw_cases: Vec<(Vec<u8>, u16)> = vec![
        (b"{\"kind\": ".to_vec(), 400),
        (b"not json".to_vec(), 400),
        (
            br#"{"kind":"sms.send","key":"k","payload":{},"max_attempts":99999999999999999999999}"#
                .to_vec(),
            422,
        ),
        (
            br#"{"kind":"sms.send","key":"k","payload":{}}{}"#.to_vec(),
            400,
        ),
        (b"".to_vec(), 400),
        (vec![b'{', 0xff, 0xfe, b'}'], 400),
        (
            b"{\"kind\":\"sms.send\",\"key\":\"k\",\"payload\":\"\xff\"}".to_vec(),
            400,
        ),
    ];
    for (body, want) in raw_cases {
        let json_type = [("content-type", "application/json")];
        let (s, ctype, text) = api
            .raw(Method::POST, "/v1/tasks", body.clone(), &json_type)
            .await;
        assert_eq!(s, want, "{:?} -> {text}", String::from_utf8_lossy(&body));
        assert_eq!(ctype, "application/problem+json");
    }
    assert_eq!(api.task_count().await, 0, "nothing was written");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_413() {
    let api = Api::start(Setup {
        limits: backstop_server::Limits {
            max_body: 4096,
            ..Default::default()
        },
        ..Setup::default()
    })
    .await;
    let (s, p) = api
        .post(
            "/v1/tasks",
            task("sms.send", "k", json!({"pad": "y".repeat(8000)})),
        )
        .await;
    assert_eq!(s, 413, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("api.max_body"));
    assert_eq!(api.task_count().await, 0);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answers_per_item_in_order() {
    let api = Api::start(Setup::default()).await;
    let (_, existing) = api
        .post("/v1/tasks", task("sms.send", "b-0", json!({"v": 0})))
        .await;
    let (_, same) = api
        .post("/v1/tasks", task("sms.send", "b-1", json!({"v": 1})))
        .await;
    let (s, r) = api
        .post(
            "/v1/tasks/batch",
            json!({"tasks": [
                task("sms.send", "b-0", json!({"v": "changed"})),
                task("sms.send", "b-1", json!({"v": 1})),
                task("sms.send", "b-2", json!({"v": 2})),
                task("report.render", "b-2", json!({"v": 2})),
            ]}),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0]["status"], 409);
    assert_eq!(results[0]["id"], existing["id"]);
    assert!(
        results[0]["detail"]
            .as_str()
            .unwrap()
            .contains("different payload")
    );
    assert_eq!(results[1]["status"], 200);
    assert_eq!(results[1]["id"], same["id"]);
    assert_eq!(results[2]["status"], 201);
    assert_eq!(results[3]["status"], 201);
    assert_ne!(results[2]["id"], results[3]["id"]);
    assert_eq!(api.task_count().await, 4);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_batch_is_refused_whole() {
    let api = Api::start(Setup {
        limits: backstop_server::Limits {
            max_batch: 3,
            ..Default::default()
        },
        ..Setup::default()
    })
    .await;
    let ok = |k: &str| task("sms.send", k, json!({}));
    let cases = vec![
        (
            json!({"tasks": [ok("a"), ok("b"), ok("a")]}),
            422,
            "appears twice",
        ),
        (
            json!({"tasks": [ok("a"), task("nope", "b", json!({}))]}),
            404,
            "tasks[1]",
        ),
        (json!({"tasks": [ok("a"), ok("")]}), 422, "tasks[1]"),
        (
            json!({"tasks": [ok("a"), {"kind": "sms.send", "key": "c", "payload": {}, "delay": "x"}]}),
            422,
            "tasks[1]: delay",
        ),
        (
            json!({"tasks": [ok("a"), ok("b"), ok("c"), ok("d")]}),
            413,
            "limit is 3",
        ),
        (json!({"tasks": []}), 422, "at least one"),
        (json!({"task": [ok("a")]}), 422, "unknown field"),
    ];
    for (body, want, says) in cases {
        let (s, p) = api.post("/v1/tasks/batch", body.clone()).await;
        assert_eq!(s, want, "{body} -> {p}");
        assert!(
            p["detail"].as_str().unwrap().contains(says),
            "{p} should say {says}"
        );
    }
    assert_eq!(
        api.task_count().await,
        0,
        "nothing of a refused batch was written"
    );
    api.stop().await;
}

/// What a browser may send cross-origin without a preflight (text/plain, a form, or no
/// content type) is refused before the body is read: no web page can enqueue into an open
/// loopback API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_endpoints_refuse_bodies_not_declared_as_json() {
    let api = Api::start(Setup::default()).await;
    let body = serde_json::to_vec(&task("sms.send", "simple", json!({}))).unwrap();
    for ctype in [
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let headers: Vec<(&str, &str)> = ctype.iter().map(|c| ("content-type", *c)).collect();
        for path in ["/v1/tasks", "/v1/tasks/batch", "/v1/leases"] {
            let (s, got, text) = api.raw(Method::POST, path, body.clone(), &headers).await;
            assert_eq!(s, 415, "{path} with {ctype:?}: {text}");
            assert_eq!(got, "application/problem+json");
            let p: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(p["type"], "urn:backstop:problem:unsupported-media-type");
            assert!(
                p["detail"].as_str().unwrap().contains("application/json"),
                "{p}"
            );
        }
    }
    assert_eq!(api.task_count().await, 0, "nothing was written");
    // JSON with parameters, and structured +json types, are JSON.
    for ctype in [
        "application/json; charset=utf-8",
        "application/vnd.api+json",
    ] {
        let (s, _, text) = api
            .raw(
                Method::POST,
                "/v1/tasks",
                body.clone(),
                &[("content-type", ctype)],
            )
            .await;
        assert!(s == 201 || s == 200, "{ctype}: {s} {text}");
    }
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_given_at_enqueue_orders_tasks_and_lists_them() {
    let api = Api::start(Setup::default()).await;
    let grouped = |key: &str| {
        let mut t = task("sms.send", key, json!({"n": key}));
        t["group"] = json!("order-1001");
        t
    };
    let (s, first) = api.post("/v1/tasks", grouped("g-1")).await;
    assert_eq!(s, 201, "{first}");
    let (s, batch) = api
        .post(
            "/v1/tasks/batch",
            json!({"tasks": [grouped("g-2"), task("sms.send", "free", json!({}))]}),
        )
        .await;
    assert_eq!(s, 200, "{batch}");
    let (_, t1) = api
        .get(&format!("/v1/tasks/{}", first["id"].as_str().unwrap()))
        .await;
    assert_eq!(
        (&t1["group"], &t1["parked"]),
        (&json!("order-1001"), &json!(false))
    );
    let (_, list) = api.get("/v1/tasks?group=order-1001").await;
    let tasks = list["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{list}");
    assert_eq!(
        (&tasks[0]["key"], &tasks[0]["parked"]),
        (&json!("g-2"), &json!(true))
    );
    assert!(tasks[0]["group_seq"].as_i64() > tasks[1]["group_seq"].as_i64());
    let (_, free) = api.get("/v1/tasks?key=free").await;
    assert!(free["tasks"][0].get("group").is_none(), "{free}");
    assert_eq!(free["tasks"][0]["parked"], false);

    // A group over 512 bytes is a 422 naming the field, and creates nothing.
    let mut long = task("sms.send", "g-3", json!({}));
    long["group"] = json!("x".repeat(513));
    let (s, p) = api.post("/v1/tasks", long).await;
    assert_eq!(s, 422, "{p}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("group: a group is 513 bytes long"),
        "{p}"
    );
    assert_eq!(api.task_count().await, 3);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_without_its_limit_key_is_a_422_naming_the_pointer() {
    let mut kind = crate::harness::push("tenant.sync");
    kind.concurrency_limit = Some(backstop_core::limit::ConcurrencyLimit {
        key: "/tenant_id".into(),
        max: 2,
        missing_key: Default::default(),
    });
    let api = Api::start(Setup {
        kinds: vec![kind],
        ..Setup::default()
    })
    .await;
    for (payload, says) in [
        (
            json!({"n": 1}),
            "limit key: the payload's /tenant_id is missing",
        ),
        (
            json!({"tenant_id": 1.5}),
            "limit key: the payload's /tenant_id is a fractional number",
        ),
        (
            json!({"tenant_id": "x".repeat(600)}),
            "/tenant_id is 600 bytes long; a limit key is at most 512",
        ),
    ] {
        let (s, p) = api
            .post("/v1/tasks", task("tenant.sync", "t-1", payload))
            .await;
        assert_eq!(s, 422, "{p}");
        assert_eq!(
            p["type"].as_str().map(|t| t.ends_with("invalid")),
            Some(true),
            "{p}"
        );
        assert!(p["detail"].as_str().unwrap().contains(says), "{p}");
    }
    assert_eq!(api.task_count().await, 0, "nothing was written");
    let (s, p) = api
        .post(
            "/v1/tasks",
            task("tenant.sync", "t-2", json!({"tenant_id": 7})),
        )
        .await;
    assert_eq!(s, 201, "{p}");
    api.stop().await;
}
