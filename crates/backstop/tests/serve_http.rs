//! `backstop serve` as a child process delivering to a real HTTP target on loopback that
//! fails some deliveries: every task's final state and timeline, every signature, and the
//! same `webhook-id` across a task's retries.

mod common;

use backstop_webhooks::StandardWebhooks;
use common::*;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

fn config(base: &str) -> String {
    let mut c = String::from(
        "[engine]\npoll_interval = \"50ms\"\nrescue_interval = \"200ms\"\ngrace = \"2s\"\n",
    );
    let fast = r#"{ schedule = ["100ms"] }"#;
    // Retry-After is honoured up to the policy's cap: give this kind a cap above 1 s.
    let capped = r#"{ base = "100ms", cap = "5s", jitter = 0.0 }"#;
    for (kind, path, attempts, backoff) in [
        ("t.ok", "/ok", 4, fast),
        ("t.flaky", "/flaky", 4, fast),
        ("t.slow", "/slow", 4, fast),
        ("t.bad", "/bad", 4, fast),
        ("t.gone", "/gone", 4, fast),
        ("t.down", "/down", 3, fast),
        ("t.busy", "/busy", 4, capped),
        ("t.redirect", "/redirect", 4, fast),
    ] {
        c += &format!(
            "[kinds.\"{kind}\"]\nurl = \"{base}{path}\"\nsecret = \"{SECRET}\"\nmax_attempts = {attempts}\n\
             backoff = {backoff}\ntimeout = \"500ms\"\nconcurrency = 4\nlease = \"5s\"\n"
        );
    }
    c
}

fn script() -> Script {
    Arc::new(|path, n| match (path, n) {
        ("/ok", _) => (200, None, vec![]),
        ("/flaky", 1 | 2) => (503, None, vec![]),
        ("/flaky", _) => (200, None, vec![]),
        ("/slow", 1) => (200, Some(Duration::from_secs(2)), vec![]),
        ("/slow", _) => (204, None, vec![]),
        ("/bad", _) => (400, None, vec![]),
        ("/gone", _) => (410, None, vec![]),
        ("/down", _) => (503, None, vec![]),
        ("/busy", 1) => (429, None, vec![("retry-after", "1".to_string())]),
        ("/busy", _) => (200, None, vec![]),
        ("/redirect", _) => (302, None, vec![("location", "/ok".to_string())]),
        _ => (404, None, vec![]),
    })
}

async fn show(w: &Workdir, id: &str) -> Value {
    w.json(&["tasks", "show", id, "--json"]).await
}

fn attempts(task: &Value) -> Vec<&Value> {
    task["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "attempt")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_delivers_retries_dead_letters_and_compensates_over_http() {
    let target = TestTarget::start(script()).await;
    let w = Workdir::new(&config(&target.base));
    let mut ids: HashMap<&str, String> = HashMap::new();
    for kind in [
        "t.ok",
        "t.flaky",
        "t.slow",
        "t.bad",
        "t.gone",
        "t.down",
        "t.busy",
        "t.redirect",
    ] {
        let id = w
            .ok(&[
                "enqueue",
                kind,
                &format!("order-{kind}"),
                "--payload",
                r#"{"amount": 100,  "note":"exact bytes"}"#,
            ])
            .await;
        ids.insert(kind, id.trim().to_string());
    }
    let mut serve = w.serve();
    w.wait_started(1).await;
    let w2 = &w;
    wait_for(
        Duration::from_secs(30),
        "every task to end",
        || async move {
            let list = w2
                .json(&["tasks", "list", "--json", "--limit", "100"])
                .await;
            let open = list
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["status"] == "pending" || t["status"] == "running")
                .count();
            (open == 0).then_some(())
        },
    )
    .await;
    signal(&serve, libc::SIGTERM);
    let status = serve.wait().await.unwrap();
    assert!(
        status.success(),
        "serve exits cleanly on SIGTERM: {}",
        w.serve_log()
    );

    let expect = [
        ("t.ok", "succeeded", vec![("succeeded", 200)]),
        (
            "t.flaky",
            "succeeded",
            vec![("retry", 503), ("retry", 503), ("succeeded", 200)],
        ),
        ("t.bad", "failed", vec![("failed", 400)]),
        ("t.gone", "compensated", vec![("skipped", 410)]),
        (
            "t.down",
            "failed",
            vec![("retry", 503), ("retry", 503), ("failed", 503)],
        ),
        (
            "t.busy",
            "succeeded",
            vec![("retry", 429), ("succeeded", 200)],
        ),
        ("t.redirect", "failed", vec![("failed", 302)]),
    ];
    for (kind, status, want) in expect {
        let t = show(&w, &ids[kind]).await;
        assert_eq!(t["status"], status, "{kind}: {t}");
        let got: Vec<(String, u64)> = attempts(&t)
            .iter()
            .map(|e| {
                (
                    e["outcome"].as_str().unwrap().to_string(),
                    e["http_status"].as_u64().unwrap(),
                )
            })
            .collect();
        let want: Vec<(String, u64)> = want.into_iter().map(|(o, s)| (o.to_string(), s)).collect();
        assert_eq!(got, want, "{kind}: {t}");
        for (i, e) in attempts(&t).iter().enumerate() {
            assert_eq!(e["attempt"], i as u64 + 1);
            assert!(e["duration_ms"].is_u64(), "{e}");
            assert!(e["at"].is_string());
        }
        assert_eq!(t["events"][0]["type"], "created");
    }
    // The timed-out first attempt is a transient failure without an HTTP status.
    let slow = show(&w, &ids["t.slow"]).await;
    assert_eq!(slow["status"], "succeeded");
    let a = attempts(&slow);
    assert_eq!(a.len(), 2, "{slow}");
    assert_eq!(a[0]["outcome"], "retry");
    assert!(
        a[0]["error"].as_str().unwrap().contains("timed out"),
        "{slow}"
    );
    assert_eq!(a[1]["http_status"], 204);
    // Retry-After: 1 was honoured: the second attempt came at least a second later.
    let busy = show(&w, &ids["t.busy"]).await;
    let b = attempts(&busy);
    let t1: jiff::Timestamp = b[0]["at"].as_str().unwrap().parse().unwrap();
    let t2: jiff::Timestamp = b[1]["at"].as_str().unwrap().parse().unwrap();
    assert!(
        t2.duration_since(t1) >= jiff::SignedDuration::from_millis(900),
        "{busy}"
    );
    let bad = show(&w, &ids["t.bad"]).await;
    assert!(bad["last_error"].as_str().unwrap().contains("400"));
    let gone = show(&w, &ids["t.gone"]).await;
    assert!(gone["reason"].as_str().unwrap().contains("410"), "{gone}");

    // What the target saw: signed exact bytes, one stable webhook-id per task.
    let signer = StandardWebhooks::from_secret(SECRET).unwrap();
    let deliveries = target.deliveries();
    assert!(
        deliveries
            .iter()
            .all(|d| d.path != "/ok" || d.header("backstop-kind") == "t.ok")
    );
    assert!(
        !deliveries
            .iter()
            .any(|d| d.path == "/ok" && d.header("backstop-kind") == "t.redirect"),
        "no redirect was followed"
    );
    for d in &deliveries {
        let kind = d.header("backstop-kind");
        assert_eq!(
            d.header("webhook-id"),
            ids[kind],
            "webhook-id is the task id"
        );
        assert_eq!(d.header("idempotency-key"), ids[kind]);
        assert_eq!(d.header("backstop-key"), format!("order-{kind}"));
        assert_eq!(
            d.body, br#"{"amount": 100,  "note":"exact bytes"}"#,
            "exact payload bytes"
        );
        let ts: i64 = d.header("webhook-timestamp").parse().unwrap();
        signer
            .verify(
                Some(d.header("webhook-id")),
                Some(d.header("webhook-timestamp")),
                Some(d.header("webhook-signature")),
                &d.body,
                ts,
                300,
            )
            .unwrap_or_else(|e| panic!("signature of {kind} does not verify: {e}"));
    }
    let per_kind = |k: &str| {
        deliveries
            .iter()
            .filter(|d| d.header("backstop-kind") == k)
            .count()
    };
    assert_eq!(per_kind("t.flaky"), 3);
    assert_eq!(per_kind("t.down"), 3);
    assert_eq!(per_kind("t.bad"), 1);
    let attempts_seen: Vec<&str> = deliveries
        .iter()
        .filter(|d| d.header("backstop-kind") == "t.flaky")
        .map(|d| d.header("backstop-attempt"))
        .collect();
    assert_eq!(attempts_seen, ["1", "2", "3"]);
}
