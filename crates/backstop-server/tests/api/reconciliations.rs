//! `/v1/reconciliations`: a statement uploaded over HTTP against the ledger, the runs, and a
//! run's report.

use crate::harness::*;
use backstop_core::Status;
use backstop_core::store::GetByKeyParams;
use serde_json::json;

async fn succeed_all(api: &Api, n: usize) {
    for i in 0..n {
        let (s, _) = api
            .post(
                "/v1/tasks",
                json!({"kind": "report.render", "key": format!("r-{i}"),
                       "payload": {"amount": 10, "currency": "EUR"}}),
            )
            .await;
        assert_eq!(s, 201);
    }
    let (s, leased) = api
        .post(
            "/v1/leases",
            json!({"kinds": ["report.render"], "max": n, "lease": "30s", "worker": "w"}),
        )
        .await;
    assert_eq!(s, 200);
    for t in leased["tasks"].as_array().unwrap() {
        let token = t["token"].as_str().unwrap();
        let (s, _) = api
            .post(
                &format!("/v1/leases/{token}/complete"),
                json!({"outcome": "succeeded"}),
            )
            .await;
        assert_eq!(s, 200);
    }
}

fn statement(keys: &[&str]) -> Vec<u8> {
    let at = jiff::Timestamp::now().to_string();
    let mut s = String::from("key,amount,currency,status,at\n");
    for k in keys {
        s += &format!("{k},10,EUR,paid,{at}\n");
    }
    s.into_bytes()
}

#[tokio::test]
async fn an_uploaded_statement_is_reconciled_applied_and_kept_as_a_run() {
    let api = Api::start(Setup::default()).await;
    succeed_all(&api, 3).await;
    let since = (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1)).to_string();
    let until = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)).to_string();
    let path = format!(
        "/v1/reconciliations?kind=report.render&since={since}&until={until}&grace=0s&apply=true"
    );
    let (status, ctype, text) = api
        .raw(
            reqwest::Method::POST,
            &path,
            statement(&["r-0", "r-2", "x-9"]),
            &[("content-type", "text/csv")],
        )
        .await;
    assert_eq!(status, 200, "{text}");
    assert!(ctype.starts_with("application/json"));
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["verdict"], "BREAKS");
    assert_eq!(r["redriven"], 1);
    assert_eq!(r["report"]["counts"]["missing_record"], 1);
    assert_eq!(r["report"]["counts"]["orphan_record"], 1);
    let run = r["run"].as_str().unwrap().to_string();
    let t = api
        .store
        .get_by_key(GetByKeyParams {
            kind: "report.render".into(),
            key: "r-1".into(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.status, Status::Pending, "the missing task runs again");

    let (s, list) = api.get("/v1/reconciliations?kind=report.render").await;
    assert_eq!(s, 200);
    assert_eq!(list["runs"][0]["id"], run.as_str());
    assert_eq!(list["runs"][0]["applied"], 1);
    let (s, one) = api.get(&format!("/v1/reconciliations/{run}")).await;
    assert_eq!(s, 200);
    assert_eq!(one["report"]["verdict"], "BREAKS");
    api.stop().await;
}

#[tokio::test]
async fn bad_uploads_get_clear_problems_and_change_nothing() {
    let api = Api::start(Setup::default()).await;
    let post = |path: String, body: Vec<u8>| {
        let api = &api;
        async move {
            api.raw(
                reqwest::Method::POST,
                &path,
                body,
                &[("content-type", "text/csv")],
            )
            .await
        }
    };
    let (s, ctype, text) = post("/v1/reconciliations?kind=nope".into(), statement(&["a"])).await;
    assert_eq!(s, 404, "{text}");
    assert!(ctype.starts_with("application/problem+json"));
    for (q, want) in [
        ("kind=report.render&format=xml", 422),
        ("kind=report.render&grace=soon", 422),
        ("kind=report.render&since=yesterday", 422),
        ("kind=report.render&map=key", 422),
        ("kind=report.render&bogus=1", 422),
        ("", 422),
    ] {
        let (s, ctype, text) = post(format!("/v1/reconciliations?{q}"), statement(&["a"])).await;
        assert_eq!(s, want, "{q}: {text}");
        assert!(ctype.starts_with("application/problem+json"), "{q}");
        assert!(text.contains("detail"), "{q}");
    }
    let (s, _, text) = post(
        "/v1/reconciliations?kind=report.render".into(),
        b"no header at all".to_vec(),
    )
    .await;
    assert!(s == 400 || s == 200, "{s}: {text}");
    let (s, list) = api.get("/v1/reconciliations").await;
    assert_eq!(s, 200);
    assert!(list["runs"].as_array().unwrap().len() <= 1);
    let (s, _) = api.get("/v1/reconciliations/st-nope").await;
    assert_eq!(s, 404);
    api.stop().await;
}
