//! What operators see of bridges: `backstop bridges list`, `GET /v1/bridges`, `/metrics` and
//! `backstop doctor`, for a bridge whose broker is down (always) and for one consuming a real
//! RabbitMQ (`BACKSTOP_TEST_AMQP_URL`).

mod common;

use common::*;
use std::time::Duration;

fn config(broker: &str, queue: &str) -> String {
    format!(
        "[engine]\npoll_interval = \"50ms\"\nbridge_beat = \"100ms\"\nbridge_down_alert = \"1s\"\n\
         [kinds.\"sms.send\"]\ntarget = \"pull\"\n\
         [bridges.sms-in]\nbroker = \"{broker}\"\nqueue = \"{queue}\"\nkind = \"sms.send\"\nkey = \"/order_id\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_whose_broker_is_down_is_shown_down_everywhere_without_its_password() {
    let w = Workdir::new(&config(
        "amqp://guest:s3cret@127.0.0.1:1/%2f",
        "sms.requests",
    ));
    let _serve = w.serve();
    let base = w.api_base().await;
    let b = wait_for(Duration::from_secs(20), "a beat of the bridge", || async {
        let v = w.json(&["bridges", "list", "--json"]).await;
        let b = v["bridges"].as_array()?.first()?.clone();
        (b["state"] == "reconnecting" && b["last_error"].is_string()).then_some(b)
    })
    .await;
    assert_eq!(b["name"], "sms-in");
    assert_eq!(b["connected"], false);
    assert_eq!(b["broker"], "amqp://guest:***@127.0.0.1:1/%2f");
    // Between beats the bridge tries again: a later read may show it `connecting` (a fresh
    // try) rather than `reconnecting` (waiting after a failure); either way it is down.
    let down = |state: &str| state == "reconnecting" || state == "connecting";
    let text = w.ok(&["bridges", "list"]).await;
    assert!(
        text.contains("sms-in")
            && text.split_whitespace().any(down)
            && text.contains("connected=false"),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
    let api: serde_json::Value = reqwest::get(format!("{base}/v1/bridges"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let state = api["bridges"][0]["state"].as_str().unwrap_or_default();
    assert!(down(state), "{api}");
    assert_eq!(api["bridges"][0]["connected"], false);
    assert!(!api.to_string().contains("s3cret"));
    let metrics = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("backstop_bridge_connected{bridge=\"sms-in\"} 0"),
        "{metrics}"
    );
    // Down past engine.bridge_down_alert (1 s): the bridge.down alert is raised.
    wait_for(Duration::from_secs(20), "the bridge.down alert", || async {
        let m = reqwest::get(format!("{base}/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        m.contains("backstop_alerts_raised_total{event=\"bridge.down\"}")
            .then_some(())
    })
    .await;
    let (ok, out, _) = w.run(&["doctor"]).await;
    assert!(!ok, "doctor must need a person: {out}");
    assert!(
        out.contains("bridge sms-in on") && out.contains("is not connected"),
        "{out}"
    );
    assert!(
        !w.serve_log().contains("s3cret"),
        "the password reached the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_bridge_lists_its_counts() {
    let Some(url) = std::env::var("BACKSTOP_TEST_AMQP_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("skipped: BACKSTOP_TEST_AMQP_URL is not set");
        return;
    };
    let queue = format!("backstop.test.cli.{}", uuid::Uuid::now_v7().simple());
    let w = Workdir::new(&config(&url, &queue));
    let _serve = w.serve();
    let base = w.api_base().await;
    wait_for(Duration::from_secs(20), "the bridge to connect", || async {
        let v = w.json(&["bridges", "list", "--json"]).await;
        (v["bridges"][0]["connected"] == true).then_some(())
    })
    .await;
    let c = lapin::Connection::connect(&url, Default::default())
        .await
        .unwrap();
    let ch = c.create_channel().await.unwrap();
    for body in [
        r#"{"order_id":"A-1"}"#,
        r#"{"order_id":"A-2"}"#,
        r#"{"order_id":"A-1"}"#,
        "{}",
    ] {
        ch.basic_publish(
            "".into(),
            queue.as_str().into(),
            Default::default(),
            body.as_bytes(),
            Default::default(),
        )
        .await
        .unwrap();
    }
    let b = wait_for(Duration::from_secs(20), "four messages settled", || async {
        let v: serde_json::Value = reqwest::get(format!("{base}/v1/bridges"))
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let b = v["bridges"][0].clone();
        (b["received"] == 4 && b["in_flight"] == 0).then_some(b)
    })
    .await;
    assert_eq!(
        (
            b["inserted"].as_u64(),
            b["deduplicated"].as_u64(),
            b["rejected"].as_u64()
        ),
        (Some(2), Some(1), Some(1))
    );
    assert_eq!(b["balanced"], true);
    let dead = w
        .json(&[
            "dead",
            "list",
            "--kind",
            "backstop.rejected.sms-in",
            "--json",
        ])
        .await;
    let dead = dead.as_array().unwrap();
    assert_eq!(dead.len(), 1, "the reject is a dead letter: {dead:?}");
    assert!(
        dead[0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("no string or number at /order_id"),
        "{dead:?}"
    );
    let _ = ch
        .queue_delete(queue.as_str().into(), Default::default())
        .await;
}
