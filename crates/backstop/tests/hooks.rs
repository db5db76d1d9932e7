//! Inbound callbacks over real HTTP, against `backstop serve`: a signed callback of each
//! scheme creates exactly one task; the same callback sent ten times at once creates one task
//! and gets ten success replies; tampered, expired, unsigned and oversized callbacks create
//! nothing and get the provider's failure reply; a callback acknowledged just before a SIGKILL
//! is still there after the restart; the record of requests is behind the API token.

mod common;
mod hook_signing;

use common::*;
use hook_signing::*;
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;

const TOKEN: &str = "ops-secret-token";
const KIND: &str = "payment.notified";

fn config() -> String {
    let hash: String = backstop_server::sha256(TOKEN.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        r#"[engine]
rescue_interval = "100ms"
[[api.tokens]]
name = "ops"
sha256 = "{hash}"
[kinds."{KIND}"]
target = "pull"
[sources.orders]
scheme = "standard-webhooks"
# The old secret first: during a rotation either one verifies.
keys = ["whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "{STANDARD_SECRET}"]
kind = "{KIND}"
max_body = 2048
[sources.stripe]
scheme = "stripe"
keys = ["{STRIPE_SECRET}"]
kind = "{KIND}"
key = "/id"
[sources.github]
scheme = "hmac-sha256"
keys = ["{HMAC_SECRET}"]
signature_header = "X-Hub-Signature-256"
key = "header:X-GitHub-Delivery"
kind = "{KIND}"
[sources.wechatpay]
scheme = "wechatpay-v3"
keys = ["{apiv3}"]
key_files = ["wechat_cert.pem"]
# The published notification was signed in 2021.
tolerance = "4000d"
kind = "{KIND}"
[sources.alipay]
scheme = "alipay-rsa2"
key_files = ["alipay_pub.pem"]
kind = "{KIND}"
"#,
        apiv3 = wechat::APIV3_KEY
    )
}

/// A work dir with the config and its key files, and Alipay's key.
fn setup() -> (Workdir, AlipayKey) {
    let alipay = AlipayKey::generate();
    let w = Workdir::new(&config());
    std::fs::write(w.path().join("wechat_cert.pem"), wechat::CERT).unwrap();
    std::fs::write(w.path().join("alipay_pub.pem"), alipay.public_pem()).unwrap();
    (w, alipay)
}

struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

async fn hook(
    client: &reqwest::Client,
    base: &str,
    source: &str,
    headers: &[(String, String)],
    body: impl Into<reqwest::Body>,
) -> Answer {
    let mut r = client.post(format!("{base}/v1/hooks/{source}"));
    for (k, v) in headers {
        r = r.header(k, v);
    }
    let resp = r.body(body).send().await.unwrap();
    Answer {
        status: resp.status().as_u16(),
        content_type: resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default(),
        body: resp.text().await.unwrap(),
    }
}

async fn api(base: &str, path: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn tasks(base: &str) -> Vec<Value> {
    let (s, page) = api(base, &format!("/v1/tasks?kind={KIND}&limit=1000")).await;
    assert_eq!(s, 200, "{page}");
    page["tasks"].as_array().unwrap().clone()
}

async fn requests(base: &str, source: &str) -> Vec<Value> {
    let (s, page) = api(base, &format!("/v1/hooks/{source}/requests?limit=1000")).await;
    assert_eq!(s, 200, "{page}");
    page["requests"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_callback_of_each_scheme_creates_exactly_one_task() {
    let (w, alipay) = setup();
    let _serve = w.serve();
    let base = w.api_base().await;
    let c = reqwest::Client::new();
    let ts = now();

    let body = r#"{"type":"order.paid","data":{"order":"A-1","amount":1999}}"#;
    let a = hook(
        &c,
        &base,
        "orders",
        &standard("msg_orders_1", ts, body),
        body,
    )
    .await;
    assert_eq!((a.status, a.body.as_str()), (204, ""), "standard-webhooks");

    let body = r#"{"id":"evt_stripe_1","type":"payment_intent.succeeded","data":{}}"#;
    let a = hook(&c, &base, "stripe", &stripe(ts, body), body).await;
    assert_eq!(a.status, 204, "stripe: {}", a.body);

    let body = r#"{"action":"completed","check_run":{"id":7}}"#;
    let a = hook(&c, &base, "github", &github("delivery-1", body), body).await;
    assert_eq!(a.status, 204, "hmac-sha256: {}", a.body);

    let a = hook(&c, &base, "wechatpay", &wechat::headers(), wechat::BODY).await;
    assert_eq!(a.status, 204, "wechatpay-v3: {}", a.body);

    let form = alipay.notification(&[
        ("notify_id", "ali-notify-1"),
        ("notify_time", "2030-01-01 10:00:00"),
        ("notify_type", "trade_status_sync"),
        ("out_trade_no", "A-2"),
        ("total_amount", "19.99"),
        ("trade_status", "TRADE_SUCCESS"),
    ]);
    let form_type = vec![(
        "content-type".to_string(),
        "application/x-www-form-urlencoded; charset=utf-8".to_string(),
    )];
    let a = hook(&c, &base, "alipay", &form_type, form).await;
    assert_eq!(
        (a.status, a.body.as_str()),
        (200, "success"),
        "alipay-rsa2 expects exactly `success`"
    );

    let all = tasks(&base).await;
    let keys: HashSet<&str> = all.iter().map(|t| t["key"].as_str().unwrap()).collect();
    let want: HashSet<&str> = [
        "msg_orders_1",
        "evt_stripe_1",
        "delivery-1",
        wechat::ENVELOPE_ID,
        "ali-notify-1",
    ]
    .into();
    assert_eq!(
        keys, want,
        "one task per callback, keyed by the provider's event id"
    );
    assert!(all.iter().all(|t| t["status"] == "pending"));
    let by_key = |k: &str| all.iter().find(|t| t["key"] == k).unwrap()["payload"].clone();
    assert_eq!(by_key("msg_orders_1")["data"]["order"], "A-1");
    // WeChat Pay: the decrypted business data, with the envelope's id and type.
    let wx = by_key(wechat::ENVELOPE_ID);
    assert_eq!(wx["id"], wechat::ENVELOPE_ID);
    assert_eq!(wx["event_type"], "PAYSCORE.USER_OPEN_SERVICE");
    assert_eq!(wx["resource"]["mchid"], "1234567890");
    assert_eq!(by_key("ali-notify-1")["trade_status"], "TRADE_SUCCESS");

    // The record of each source: the raw request, its verdict and its task.
    let orders = requests(&base, "orders").await;
    assert_eq!(orders.len(), 1);
    assert_eq!(orders[0]["verdict"], "accepted");
    assert_eq!(orders[0]["event_id"], "msg_orders_1");
    assert_eq!(
        orders[0]["body"],
        r#"{"type":"order.paid","data":{"order":"A-1","amount":1999}}"#
    );
    let task_id = orders[0]["task_id"].as_str().unwrap();
    assert!(all.iter().any(|t| t["id"] == task_id));
    let names: Vec<&str> = orders[0]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h[0].as_str().unwrap())
        .collect();
    assert!(names.contains(&"webhook-signature"), "{names:?}");
    let wx_req = requests(&base, "wechatpay").await;
    assert_eq!(
        wx_req[0]["body"].as_str().unwrap().as_bytes(),
        wechat::BODY,
        "the exact body bytes are stored"
    );

    // The record is behind the API token; the callback itself is not.
    let r = reqwest::get(format!("{base}/v1/hooks/orders/requests"))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let (s, p) = api(&base, "/v1/hooks/nowhere/requests").await;
    assert_eq!(
        (s, p["type"].as_str()),
        (404, Some("urn:backstop:problem:not-found"))
    );
    let a = hook(&c, &base, "nowhere", &[], "{}").await;
    assert_eq!(
        (a.status, a.content_type.as_str()),
        (404, "application/problem+json")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_callback_ten_times_at_once_creates_one_task_and_ten_successes() {
    let (w, _) = setup();
    let _serve = w.serve();
    let base = w.api_base().await;
    let body = r#"{"type":"order.paid","data":{"order":"B-7"}}"#.to_string();
    let headers = standard("msg_repeat", now(), &body);
    let mut sends = Vec::new();
    for _ in 0..10 {
        let (base, headers, body) = (base.clone(), headers.clone(), body.clone());
        // Ten connections, as a provider's retries would arrive.
        sends.push(tokio::spawn(async move {
            hook(&reqwest::Client::new(), &base, "orders", &headers, body).await
        }));
    }
    for s in sends {
        let a = s.await.unwrap();
        assert_eq!(a.status, 204, "{}", a.body);
    }
    let all = tasks(&base).await;
    assert_eq!(all.len(), 1, "{all:?}");
    let reqs = requests(&base, "orders").await;
    assert_eq!(reqs.len(), 10);
    let accepted = reqs.iter().filter(|r| r["verdict"] == "accepted").count();
    let duplicate = reqs.iter().filter(|r| r["verdict"] == "duplicate").count();
    assert_eq!((accepted, duplicate), (1, 9));
    assert!(reqs.iter().all(|r| r["task_id"] == all[0]["id"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_expired_unsigned_and_oversized_callbacks_create_nothing() {
    let (w, alipay) = setup();
    let _serve = w.serve();
    let base = w.api_base().await;
    let c = reqwest::Client::new();
    let body = r#"{"type":"order.paid","data":{"order":"C-1","amount":100}}"#;
    let signed = standard("msg_bad", now(), body);

    let tampered = body.replace("100", "999");
    let a = hook(&c, &base, "orders", &signed, tampered).await;
    assert_eq!(a.status, 401, "tampered: {}", a.body);
    assert_eq!(a.content_type, "application/problem+json");
    assert!(a.body.contains("no signature matched"), "{}", a.body);

    let old = standard("msg_old", now() - 600, body);
    let a = hook(&c, &base, "orders", &old, body).await;
    assert_eq!(a.status, 401, "expired: {}", a.body);
    assert!(a.body.contains("tolerance"), "{}", a.body);

    let unsigned: Vec<_> = signed
        .iter()
        .filter(|(k, _)| k != "webhook-signature")
        .cloned()
        .collect();
    let a = hook(&c, &base, "orders", &unsigned, body).await;
    assert_eq!(a.status, 401, "unsigned: {}", a.body);
    assert!(
        a.body.contains("missing the webhook-signature header"),
        "{}",
        a.body
    );

    let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(4096));
    let a = hook(&c, &base, "orders", &standard("msg_big", now(), &big), big).await;
    assert_eq!(a.status, 413, "oversized: {}", a.body);
    assert_eq!(a.content_type, "application/problem+json");

    // WeChat Pay and Alipay answer failures in their own formats.
    let mut wx = wechat::BODY.to_vec();
    wx[100] ^= 1;
    let a = hook(&c, &base, "wechatpay", &wechat::headers(), wx).await;
    assert_eq!(a.status, 401);
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v["code"], "FAIL", "{v}");
    let form = alipay
        .notification(&[("notify_id", "n-9"), ("total_amount", "1.00")])
        .replace("1.00", "9.00");
    let a = hook(&c, &base, "alipay", &[], form).await;
    assert_eq!((a.status, a.body.as_str()), (401, "fail"));

    assert!(tasks(&base).await.is_empty(), "no task for any of them");
    let reqs = requests(&base, "orders").await;
    assert_eq!(reqs.len(), 4);
    assert!(
        reqs.iter()
            .all(|r| r["verdict"] == "rejected" && r["task_id"].is_null())
    );
    let reasons: Vec<&str> = reqs.iter().map(|r| r["reason"].as_str().unwrap()).collect();
    assert!(
        reasons[0].contains("over the source's limit"),
        "{reasons:?}"
    );
    assert_eq!(reqs[0]["body_len"], big_len(), "the real size is recorded");
    assert!(
        reqs.iter()
            .all(|r| r["body"].as_str().unwrap_or("").len() <= 1024),
        "rejected bodies are kept as a bounded excerpt"
    );
    assert_eq!(requests(&base, "wechatpay").await[0]["verdict"], "rejected");
}

fn big_len() -> usize {
    format!(r#"{{"pad":"{}"}}"#, "x".repeat(4096)).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_acknowledged_before_sigkill_is_there_after_restart() {
    let (w, _) = setup();
    let serve = w.serve();
    let base = w.api_base().await;
    // Providers keep sending until the kill; every acknowledged event id is kept.
    let mut senders = Vec::new();
    for p in 0..4 {
        let base = base.clone();
        senders.push(tokio::spawn(async move {
            let c = reqwest::Client::new();
            let mut acked = Vec::new();
            for i in 0.. {
                let id = format!("msg_{p}_{i}");
                let body = format!(r#"{{"n":{i}}}"#);
                let headers = standard(&id, now(), &body);
                let mut r = c.post(format!("{base}/v1/hooks/orders"));
                for (k, v) in &headers {
                    r = r.header(k, v);
                }
                match r.body(body).send().await {
                    Ok(resp) if resp.status().as_u16() == 204 => acked.push(id),
                    _ => break,
                }
            }
            acked
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    signal(&serve, libc::SIGKILL);
    let mut acked = Vec::new();
    for s in senders {
        acked.extend(s.await.unwrap());
    }
    assert!(
        acked.len() > 20,
        "acknowledged before the kill: {}",
        acked.len()
    );
    drop(serve);
    let _again = w.serve();
    wait_for(Duration::from_secs(20), "the restarted server", || async {
        let log = w.serve_log();
        (log.matches("api=http://").count() >= 2).then_some(())
    })
    .await;
    let base = w.api_base().await;
    let keys: HashSet<String> = tasks(&base)
        .await
        .iter()
        .map(|t| t["key"].as_str().unwrap().to_string())
        .collect();
    for id in &acked {
        assert!(keys.contains(id), "acknowledged callback {id} was lost");
    }
    let recorded: HashSet<String> = requests(&base, "orders")
        .await
        .iter()
        .filter(|r| r["verdict"] == "accepted")
        .map(|r| r["event_id"].as_str().unwrap().to_string())
        .collect();
    for id in &acked {
        assert!(
            recorded.contains(id),
            "the request of {id} was not recorded"
        );
    }
}
