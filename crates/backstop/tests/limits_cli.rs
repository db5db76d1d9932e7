//! Overriding a key's limits through the binary: `backstop limits set` in one process changes
//! what a running `serve` leases for that key from its next claim; `limits show` tells the
//! limits in force and the history with who and why; `limits clear` puts the kind's back; bad
//! input is one line naming what to fix, and changes nothing.

mod common;

use common::*;
use serde_json::{Value, json};

const CONFIG: &str = "[kinds.\"report.render\"]\ntarget = \"pull\"\n\
    limits.concurrency = { key = \"/tenant\", max = 1 }\n\
    limits.rate = { key = \"/tenant\", limit = 100, period = \"1s\", burst = 100 }\n";

async fn post(url: String, body: Value) -> Value {
    let r = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    r.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_overridden_from_the_cli_changes_what_serve_leases() {
    let w = Workdir::new(CONFIG);
    let mut serve = w.serve();
    let base = w.api_base().await;
    let mut ids = Vec::new();
    for i in 0..4 {
        let t = post(
            format!("{base}/v1/tasks"),
            json!({"kind": "report.render", "key": format!("a{i}"), "payload": {"tenant": "acme"}}),
        )
        .await;
        ids.push(t["id"].as_str().unwrap().to_string());
    }
    let out = w
        .ok(&[
            "limits",
            "set",
            "report.render",
            "acme",
            "--max",
            "3",
            "--reason",
            "acme's contract allows 3",
        ])
        .await;
    assert!(out.contains("at most 3 at once per /tenant"), "{out}");
    let got = post(
        format!("{base}/v1/leases"),
        json!({"kinds": ["report.render"], "worker": "w1", "max": 10}),
    )
    .await;
    assert_eq!(got["tasks"].as_array().unwrap().len(), 3, "{got}");
    // The fourth waits for a slot, and `why` names the key's limit in force: the override.
    let leased: Vec<&str> = got["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    let waiting = ids.iter().find(|i| !leased.contains(&i.as_str())).unwrap();
    let why = w.ok(&["why", waiting]).await;
    assert!(
        why.contains("at most 3 at once per /tenant (this task's: \"acme\")"),
        "{why}"
    );

    let shown = w
        .json(&["limits", "show", "report.render", "acme", "--json"])
        .await;
    assert_eq!(shown["override"]["max"], 3, "{shown}");
    assert_eq!(shown["history"][0]["by"], "cli", "{shown}");
    assert_eq!(shown["history"][0]["reason"], "acme's contract allows 3");
    let kind = w.ok(&["limits", "show", "report.render"]).await;
    assert!(
        kind.contains("at most 1 at once per /tenant; 100 per 1s per /tenant, burst 100"),
        "{kind}"
    );
    assert!(kind.contains("\"acme\": max 3"), "{kind}");

    w.ok(&[
        "limits",
        "clear",
        "report.render",
        "acme",
        "--reason",
        "contract ended",
    ])
    .await;
    let shown = w
        .json(&["limits", "show", "report.render", "acme", "--json"])
        .await;
    assert!(shown.get("override").is_none(), "{shown}");
    assert_eq!(shown["concurrency"]["max"], 1, "{shown}");

    for (args, says) in [
        (
            vec![
                "limits",
                "set",
                "report.render",
                "acme",
                "--max",
                "0",
                "--reason",
                "r",
            ],
            "max 0 would never let a task of the key run",
        ),
        (
            vec![
                "limits", "set", "nope", "acme", "--max", "2", "--reason", "r",
            ],
            "no kind named \"nope\"",
        ),
        (
            vec![
                "limits",
                "set",
                "report.render",
                "acme",
                "--rate",
                "0",
                "--reason",
                "r",
            ],
            "--rate 0 would never let a task start",
        ),
        (
            vec!["limits", "clear", "report.render", "acme", "--reason", "r"],
            "has no override to clear",
        ),
    ] {
        let (ok, _, err) = w.run(&args).await;
        assert!(!ok, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    let shown = w
        .json(&["limits", "show", "report.render", "acme", "--json"])
        .await;
    assert_eq!(
        shown["history"].as_array().unwrap().len(),
        2,
        "the refused ones left nothing: {shown}"
    );
    signal(&serve, libc::SIGTERM);
    assert!(serve.wait().await.unwrap().success());
}
