//! The command line: bad input gets one clear error line, a non-zero exit and changes
//! nothing; dead letters are listed, retried and resolved by hand.

mod common;

use common::*;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

fn config(base: &str) -> String {
    format!(
        "[engine]\npoll_interval = \"50ms\"\nmax_payload = 200\n\
         [kinds.\"t.ok\"]\nurl = \"{base}/ok\"\nsecret = \"{SECRET}\"\n\
         [kinds.\"t.bad\"]\nurl = \"{base}/bad\"\nmax_attempts = 2\n"
    )
}

async fn target() -> TestTarget {
    TestTarget::start(Arc::new(|path, _| match path {
        "/ok" => (200, None, vec![]),
        _ => (400, None, vec![]),
    }))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_one_error_line_and_changes_nothing() {
    let t = target().await;
    let w = Workdir::new(&config(&t.base));
    // Nothing may create the database either.
    let long_key = "k".repeat(600);
    let long_kind = "k".repeat(200);
    let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(300));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["enqueue", "t.ok", "k1", "--payload", "{oops"],
            "not valid JSON",
        ),
        (
            vec!["enqueue", "nope.kind", "k1", "--payload", "{}"],
            "unknown kind",
        ),
        (
            vec!["enqueue", "t.ok", "k1", "--payload", &big],
            "limit is 200",
        ),
        (
            vec!["enqueue", "t.ok", "k1", "--payload", "{}", "--delay", "10x"],
            "invalid duration",
        ),
        (
            vec!["enqueue", "t.ok", "", "--payload", "{}"],
            "key must not be empty",
        ),
        (
            vec!["enqueue", "t.ok", &long_key, "--payload", "{}"],
            "the limit is 512",
        ),
        (
            vec!["enqueue", "", "k1", "--payload", "{}"],
            "kind must not be empty",
        ),
        (
            vec!["enqueue", &long_kind, "k1", "--payload", "{}"],
            "the limit is 128",
        ),
        (
            vec![
                "enqueue",
                "t.ok",
                "k1",
                "--payload",
                "{}",
                "--max-attempts",
                "0",
            ],
            "max_attempts",
        ),
        (vec!["tasks", "show", "not-a-uuid"], "is not a task id"),
        (
            vec!["tasks", "list", "--status", "sleeping"],
            "unknown status",
        ),
        (vec!["dead", "retry", "nope"], "is not a task id"),
    ];
    for (args, want) in &cases {
        let (ok, out, err) = w.run(args).await;
        assert!(!ok, "{args:?} should fail");
        assert!(out.is_empty(), "{args:?} printed to stdout: {out}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line, got {err:?}"
        );
        assert!(err.contains(want), "{args:?}: {err:?} should say {want:?}");
        assert!(!w.db().exists(), "{args:?} created the database");
    }
    // An unwritable database path.
    let (ok, _, err) = w
        .run(&[
            "--database",
            "sqlite:///proc/backstop-nope/x.db",
            "enqueue",
            "t.ok",
            "k",
            "--payload",
            "{}",
        ])
        .await;
    assert!(!ok);
    assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    assert!(
        err.contains("cannot open the database") && err.contains("/proc/backstop-nope/x.db"),
        "{err}"
    );

    // With a ledger in place, refused input leaves it as it was.
    let id = w
        .ok(&["enqueue", "t.ok", "k1", "--payload", r#"{"a":1}"#])
        .await;
    let before = w.json(&["tasks", "list", "--json"]).await;
    for (args, _) in &cases {
        assert!(!w.run(args).await.0);
    }
    let (ok, _, err) = w
        .run(&["enqueue", "t.ok", "k1", "--payload", r#"{"a":2}"#])
        .await;
    assert!(!ok && err.contains("different payload"), "{err}");
    let (ok, out, _) = w
        .run(&["enqueue", "t.ok", "k1", "--payload", r#"{ "a": 1 }"#])
        .await;
    assert!(ok, "same payload is idempotent");
    assert_eq!(out, id, "the existing task's id");
    assert_eq!(w.json(&["tasks", "list", "--json"]).await, before);

    // A wrong config names the file, the key and the problem.
    std::fs::write(
        w.path().join("bad.toml"),
        "[kinds.\"a.b\"]\nurl = \"http://x/\"\ntimeout = \"soon\"\n",
    )
    .unwrap();
    let (ok, _, err) = w.run(&["--config", "bad.toml", "tasks", "list"]).await;
    assert!(!ok);
    assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    assert!(
        err.contains("bad.toml: kinds.\"a.b\".timeout: invalid duration \"soon\""),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_retried_and_resolved_by_hand() {
    let t = target().await;
    let w = Workdir::new(&config(&t.base));
    let ok_id = w
        .ok(&["enqueue", "t.ok", "o1", "--payload", "{}"])
        .await
        .trim()
        .to_string();
    let enq = w
        .json(&[
            "enqueue",
            "t.bad",
            "b1",
            "--payload",
            r#"{"refund":77}"#,
            "--json",
        ])
        .await;
    assert_eq!(enq["status"], "pending");
    assert_eq!(enq["created"], true);
    for field in [
        "id",
        "kind",
        "key",
        "status",
        "attempts",
        "max_attempts",
        "run_at",
        "expires_at",
        "last_error",
        "reason",
        "created_at",
    ] {
        assert!(enq.get(field).is_some(), "task JSON has {field}: {enq}");
    }
    let bad_id = enq["id"].as_str().unwrap().to_string();
    let mut serve = w.serve();
    w.wait_started(1).await;
    let w2 = &w;
    let dead = wait_for(Duration::from_secs(20), "the dead letter", || async move {
        let d = w2.json(&["dead", "list", "--json"]).await;
        (d.as_array().unwrap().len() == 1).then_some(d)
    })
    .await;
    assert_eq!(dead[0]["id"], bad_id.as_str());
    assert_eq!(dead[0]["attempts"], 1, "400 is permanent: no retry");

    let out = w.ok(&["dead", "retry", &bad_id]).await;
    assert!(out.contains("retried"), "{out}");
    let bad_ref = bad_id.as_str();
    let bad = wait_for(
        Duration::from_secs(20),
        "the retried task to fail again",
        || async move {
            let t = w2.json(&["tasks", "show", bad_ref, "--json"]).await;
            (t["status"] == "failed" && t["attempts"] == 2).then_some(t)
        },
    )
    .await;
    let types: Vec<&str> = bad["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["created", "attempt", "retried", "attempt"]);
    assert!(
        bad["events"][2]["actor"]
            .as_str()
            .unwrap()
            .starts_with("cli")
    );

    // Retrying a task that is not dead is refused.
    let (ok, _, err) = w.run(&["dead", "retry", &ok_id]).await;
    assert!(!ok && err.contains("succeeded"), "{err}");
    let (ok, _, err) = w.run(&["dead", "resolve", &bad_id, "--reason", "  "]).await;
    assert!(!ok && err.contains("--reason"), "{err}");
    let out = w
        .ok(&["dead", "resolve", &bad_id, "--reason", "refunded by hand"])
        .await;
    assert!(out.contains("compensated"), "{out}");
    let t = w.json(&["tasks", "show", &bad_id, "--json"]).await;
    assert_eq!(t["status"], "compensated");
    assert_eq!(t["reason"], "refunded by hand");
    let last = t["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["type"], "resolved");
    assert!(
        w.json(&["dead", "list", "--json"])
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );
    let human = w.ok(&["tasks", "show", &bad_id]).await;
    assert!(
        human.contains("timeline") && human.contains("attempt #2") && human.contains("HTTP 400"),
        "{human}"
    );
    let listed = w.ok(&["tasks", "list", "--kind", "t.ok"]).await;
    assert!(
        listed.contains(&ok_id) && !listed.contains(&bad_id),
        "{listed}"
    );

    signal(&serve, libc::SIGTERM);
    assert!(serve.wait().await.unwrap().success());
    let _: Value = Value::Null;
}

/// A read pointed at the wrong place must say that there is no ledger there, not print an
/// empty answer from a ledger it just made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_commands_on_a_missing_ledger_say_so_and_create_nothing() {
    let w = Workdir::new("");
    let id = "0192f0c0-0000-7000-8000-000000000000";
    let elsewhere = format!("sqlite://{}", w.path().join("elsewhere.db").display());
    for args in [
        vec!["tasks", "list"],
        vec!["tasks", "list", "--json"],
        vec!["tasks", "show", id],
        vec!["dead", "list"],
        vec!["dead", "retry", id],
        vec!["why", id],
        vec!["doctor"],
        vec!["--database", &elsewhere, "tasks", "list"],
    ] {
        let (ok, out, err) = w.run(&args).await;
        assert!(!ok, "{args:?} should fail");
        assert!(out.is_empty(), "{args:?} printed {out:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err:?}");
        assert!(err.contains("there is no ledger at"), "{args:?}: {err}");
        assert!(!w.db().exists(), "{args:?} created backstop.db");
        assert!(
            !w.path().join("elsewhere.db").exists(),
            "{args:?} created elsewhere.db"
        );
    }
    // Once there is one, an empty listing says so.
    w.ok(&["migrate"]).await;
    assert_eq!(w.ok(&["tasks", "list"]).await, "no tasks in the ledger\n");
    assert_eq!(
        w.ok(&["tasks", "list", "--kind", "sms.send", "--status", "failed"])
            .await,
        "no tasks with kind sms.send and status failed in the ledger\n"
    );
    assert_eq!(
        w.ok(&["dead", "list"]).await,
        "no dead letters in the ledger\n"
    );
    assert_eq!(w.ok(&["tasks", "list", "--json"]).await, "[]\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_name_the_argument_and_speak_plainly() {
    let w = Workdir::new("");
    for (args, says) in [
        (
            vec!["enqueue", "sms.send"],
            "the following required arguments were not provided: --payload <PAYLOAD>, <KEY> (see --help)",
        ),
        (
            vec!["tasks", "list", "--limit", "ten"],
            "'--limit <LIMIT>': expected a whole number from 1 to 10000",
        ),
        (
            vec!["tasks", "list", "--limit", "0"],
            "'--limit <LIMIT>': expected a whole number from 1 to 10000",
        ),
        (
            vec![
                "enqueue",
                "a",
                "b",
                "--payload",
                "{}",
                "--max-attempts",
                "x",
            ],
            "'--max-attempts <MAX_ATTEMPTS>': expected a whole number",
        ),
        (
            vec!["bench", "--tasks", "many"],
            "'--tasks <TASKS>': expected a whole number",
        ),
    ] {
        let (ok, out, err) = w.run(&args).await;
        assert!(!ok && out.is_empty(), "{args:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err:?}");
        assert!(err.contains(says), "{args:?}: {err:?} should say {says:?}");
        assert!(!err.contains("invalid digit"), "{args:?}: {err}");
    }
    // A config value of the wrong type, in words and with its line.
    std::fs::write(
        w.path().join("typed.toml"),
        "[kinds.a]\nurl = \"http://127.0.0.1:9/\"\nmax_attempts = \"five\"\n",
    )
    .unwrap();
    let (ok, _, err) = w.run(&["--config", "typed.toml", "migrate"]).await;
    assert!(!ok);
    assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    assert!(
        err.contains("typed.toml: line 3, column 16 (`max_attempts = \"five\"`)")
            && err.contains("expected a whole number from 0 to 4294967295"),
        "{err}"
    );
    assert!(!err.contains("u32"), "{err}");
}
