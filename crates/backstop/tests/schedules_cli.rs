//! Schedules through the binary: a bad `[schedules.NAME]` stops the start with the schedule,
//! the field and what was expected; `backstop schedules list|trigger|pause|resume|backfill`
//! on a ledger `serve` plans; `/v1/schedules` registers, lists, pauses and removes.

mod common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;

const KIND: &str = "[kinds.\"report.render\"]\ntarget = \"pull\"\n";

fn config(schedule: &str) -> String {
    format!("{KIND}[schedules.nightly]\nkind = \"report.render\"\n{schedule}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_schedule_stops_the_start_with_one_line_naming_it() {
    for (schedule, want) in [
        (
            "cron = \"61 * * * *\"\n",
            "schedules.\"nightly\".cron: \"61 * * * *\" is not a cron expression",
        ),
        ("cron = \"* * * *\"\n", "expected 5 fields"),
        ("cron = \"@fortnightly\"\n", "unknown alias @fortnightly"),
        (
            "cron = \"0 2 * * *\"\ntimezone = \"Asia/Shangai\"\n",
            "schedules.\"nightly\".timezone: \"Asia/Shangai\" is not an IANA time zone",
        ),
    ] {
        let w = Workdir::new(&config(schedule));
        let (ok, _, err) = w.run(&["schedules", "list"]).await;
        assert!(!ok, "{schedule}");
        assert!(err.contains(want), "{schedule}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    let w = Workdir::new(&format!(
        "{KIND}[schedules.nightly]\nkind = \"report.send\"\ncron = \"0 2 * * *\"\n"
    ));
    let (ok, _, err) = w.run(&["schedules", "list"]).await;
    assert!(!ok);
    assert!(
        err.contains("schedules.\"nightly\".kind: \"report.send\" is not a configured kind"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_triggers_pauses_and_backfills() {
    let w = Workdir::new(&config(
        "cron = \"* * * * * *\"\nseconds = true\noverlap = \"allow\"\n",
    ));
    let mut serve = w.serve();
    w.wait_started(1).await;
    // A few instants planned.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let list = w.json(&["schedules", "list", "--json"]).await;
    let s = &list["schedules"][0];
    assert_eq!(s["name"], "nightly");
    assert_eq!(s["kind"], "report.render");
    assert_eq!(s["next"].as_array().unwrap().len(), 5);
    let ticks = s["last_ticks"].as_array().unwrap();
    assert!(
        ticks.iter().filter(|t| t["status"] == "pending").count() >= 1,
        "{ticks:?}"
    );
    // As the reconciler's last pass found them: nothing late, overrunning or missing.
    for count in ["late", "overrun", "rows_missing"] {
        assert_eq!(s[count], 0, "{count}: {s}");
    }
    assert_eq!(s["silent"], false);
    let text = w.ok(&["schedules", "list"]).await;
    assert!(text.contains("nightly@20"), "{text}");
    assert!(text.contains("  late 0  overrun 0"), "{text}");

    let t = w.json(&["schedules", "trigger", "nightly", "--json"]).await;
    assert!(t["key"].as_str().unwrap().starts_with("nightly@manual:"));
    let shown = w
        .json(&["tasks", "show", t["id"].as_str().unwrap(), "--json"])
        .await;
    assert_eq!(shown["payload"]["manual"], true);

    w.ok(&["schedules", "pause", "nightly", "--reason", "maintenance"])
        .await;
    let list = w.json(&["schedules", "list", "--json"]).await;
    assert_eq!(list["schedules"][0]["paused"], true);
    assert_eq!(list["schedules"][0]["paused_note"], "cli: maintenance");
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let list = w.json(&["schedules", "list", "--json"]).await;
    let paused_rows = list["schedules"][0]["last_ticks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            t["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("paused"))
        })
        .count();
    assert!(paused_rows >= 1, "{list}");
    w.ok(&["schedules", "resume", "nightly"]).await;

    let (ok, _, err) = w.run(&["schedules", "pause", "weekly"]).await;
    assert!(!ok);
    assert!(
        err.contains("no schedule named \"weekly\" (configured: nightly)"),
        "{err}"
    );

    signal(&serve, libc::SIGTERM);
    serve.wait().await.unwrap();

    // Backfill an hour before anything was planned: 3,600 instants, idempotent.
    let now = jiff::Timestamp::now();
    let from = (now - jiff::SignedDuration::from_hours(2)).to_string();
    let to = (now - jiff::SignedDuration::from_hours(1)).to_string();
    let dry = w
        .json(&[
            "schedules",
            "backfill",
            "nightly",
            "--from",
            &from,
            "--to",
            &to,
            "--dry-run",
            "--json",
        ])
        .await;
    assert_eq!(dry["created"], dry["instants"]);
    assert!(dry["instants"].as_u64().unwrap() >= 3600);
    let first = w
        .json(&[
            "schedules",
            "backfill",
            "nightly",
            "--from",
            &from,
            "--to",
            &to,
            "--json",
        ])
        .await;
    assert_eq!(first["created"], dry["created"]);
    let second = w
        .json(&[
            "schedules",
            "backfill",
            "nightly",
            "--from",
            &from,
            "--to",
            &to,
            "--json",
        ])
        .await;
    assert_eq!(second["created"], 0);
    assert_eq!(second["existing"], first["instants"]);
    let (ok, _, err) = w
        .run(&[
            "schedules",
            "backfill",
            "nightly",
            "--from",
            &to,
            "--to",
            &from,
        ])
        .await;
    assert!(!ok);
    assert!(err.contains("is after --to"), "{err}");
}

async fn call(method: reqwest::Method, url: String, body: Option<Value>) -> (u16, Value) {
    let mut r = reqwest::Client::new().request(method, url);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_registers_lists_pauses_and_removes_schedules() {
    let w = Workdir::new(KIND);
    let mut serve = w.serve();
    let base = w.api_base().await;
    let (s, e) = call(
        reqwest::Method::POST,
        format!("{base}/v1/schedules"),
        Some(
            json!({"name": "ping", "cron": "* * * * * *", "seconds": true, "kind": "report.render",
                    "overlap": "allow", "payload": {"n": 1}}),
        ),
    )
    .await;
    assert_eq!(s, 201, "{e}");
    assert_eq!(e["registered"], true);
    // Planned by the running process within its refresh.
    let key = wait_for(Duration::from_secs(15), "a registered tick", || {
        let base = base.clone();
        async move {
            let (_, l) = call(reqwest::Method::GET, format!("{base}/v1/schedules"), None).await;
            l["schedules"][0]["last_ticks"]
                .as_array()?
                .iter()
                .find(|t| t["status"] == "pending")
                .map(|t| t["key"].as_str().unwrap().to_string())
        }
    })
    .await;
    assert!(key.starts_with("ping@"), "{key}");
    // The reconciler's findings are in the listing as in `schedules list --json`.
    let (_, l) = call(reqwest::Method::GET, format!("{base}/v1/schedules"), None).await;
    let ping = &l["schedules"][0];
    for field in ["late", "overrun", "rows_missing"] {
        assert!(ping[field].is_u64(), "{field} in {ping}");
    }
    assert_eq!(ping["silent"], false, "{ping}");

    let (s, e) = call(
        reqwest::Method::POST,
        format!("{base}/v1/schedules"),
        Some(json!({"name": "bad", "cron": "61 * * * *", "kind": "report.render"})),
    )
    .await;
    assert_eq!(s, 422, "{e}");
    assert!(e["detail"].as_str().unwrap().contains("`cron`"), "{e}");
    let (s, e) = call(
        reqwest::Method::POST,
        format!("{base}/v1/schedules"),
        Some(json!({"name": "bad", "cron": "0 2 * * *", "kind": "nope"})),
    )
    .await;
    assert_eq!(s, 422, "{e}");
    assert!(
        e["detail"]
            .as_str()
            .unwrap()
            .contains("not a configured kind"),
        "{e}"
    );

    let (s, e) = call(
        reqwest::Method::POST,
        format!("{base}/v1/schedules/ping/pause"),
        Some(json!({"reason": "deploy"})),
    )
    .await;
    assert_eq!((s, &e["paused"]), (200, &json!(true)), "{e}");
    let (s, e) = call(
        reqwest::Method::POST,
        format!("{base}/v1/schedules/ping/resume"),
        None,
    )
    .await;
    assert_eq!((s, &e["paused"]), (200, &json!(false)), "{e}");
    let (s, e) = call(
        reqwest::Method::POST,
        format!("{base}/v1/schedules/none/trigger"),
        None,
    )
    .await;
    assert_eq!(s, 404, "{e}");
    let (s, e) = call(
        reqwest::Method::POST,
        format!("{base}/v1/schedules/ping/backfill"),
        Some(json!({"from": "yesterday", "to": "2026-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(s, 422, "{e}");
    assert!(
        e["detail"]
            .as_str()
            .unwrap()
            .contains("from: \"yesterday\""),
        "{e}"
    );

    let (s, _) = call(
        reqwest::Method::DELETE,
        format!("{base}/v1/schedules/ping"),
        None,
    )
    .await;
    assert_eq!(s, 204);
    let (_, l) = call(reqwest::Method::GET, format!("{base}/v1/schedules"), None).await;
    assert_eq!(l["schedules"], json!([]));
    signal(&serve, libc::SIGTERM);
    serve.wait().await.unwrap();
}
