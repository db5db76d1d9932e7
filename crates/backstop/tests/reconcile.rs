//! `backstop reconcile` end to end on a SQLite ledger: the classic false success (tasks read
//! `succeeded`, the provider never sent them), found from the provider's receipts and
//! re-driven exactly once per run, also when the run is killed and run again.

mod common;

use backstop::{EventType, Status, Store, TaskId};
use backstop_core::AttemptOutcome;
use backstop_core::store::{
    ClaimParams, CompleteParams, Completion, EnqueueParams, LeaseRef, StatementRunsParams,
};
use backstop_core::store::{CountsParams, GetParams, StatementRunParams, TimelineParams};
use backstop_core::task::NewTask;
use common::*;
use std::sync::Arc;
use std::time::Duration;

const CONFIG: &str = "[kinds.\"sms.send\"]\nurl = \"http://127.0.0.1:9/sms\"\n";

/// `n` SMS tasks that all read `succeeded`, each costing 5 cents.
async fn sent(store: &Arc<dyn Store>, n: usize) -> Vec<TaskId> {
    let now = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(2);
    let mut ids = Vec::new();
    for from in (0..n).step_by(1000) {
        let tasks: Vec<NewTask> = (from..(from + 1000).min(n))
            .map(|i| NewTask {
                id: TaskId::new(),
                kind: "sms.send".into(),
                key: format!("sms-{i}"),
                payload: format!(r#"{{"to":"+1555{i:07}","amount":5,"currency":"USD"}}"#)
                    .into_bytes(),
                max_attempts: 5,
                run_at: now,
                expires_at: None,
                traceparent: None,
                intake: Default::default(),
                origin: None,
                group: None,
            })
            .collect();
        ids.extend(tasks.iter().map(|t| t.id));
        let len = tasks.len();
        store.enqueue(EnqueueParams { tasks, now }).await.unwrap();
        claim_and_succeed(store, len, now).await;
    }
    ids
}

/// Claims the pending tasks and completes them as succeeded, as a handler that swallows its
/// provider's failure would.
async fn succeed_again(store: &Arc<dyn Store>) {
    assert_eq!(
        claim_and_succeed(store, 10, jiff::Timestamp::now()).await,
        3
    );
}

/// Claims up to `limit` due tasks at `now` and completes each as succeeded; returns how many.
async fn claim_and_succeed(store: &Arc<dyn Store>, limit: usize, now: jiff::Timestamp) -> usize {
    let claimed = store
        .claim(ClaimParams {
            kind: "sms.send".into(),
            limit,
            start: limit,
            owner: "w1".into(),
            now,
            lease_until: now + jiff::SignedDuration::from_secs(60),
            max_attempts: 5,
            on_group_failure: Default::default(),
            per_key: None,
        })
        .await
        .unwrap();
    let completions = claimed
        .iter()
        .map(|c| Completion {
            lease: LeaseRef {
                id: c.id,
                epoch: c.epoch,
            },
            attempt: c.attempt,
            status: Status::Succeeded,
            run_at: None,
            last_error: None,
            reason: None,
            outcome: AttemptOutcome::Succeeded,
            http_status: Some(200),
            note: None,
            started_at: now,
            ended_at: now,
            worker: "w1".into(),
        })
        .collect();
    store
        .complete(CompleteParams {
            completions,
            starts: None,
            claims: Vec::new(),
            now,
        })
        .await
        .unwrap();
    claimed.len()
}

/// The provider's receipts: every task but those in `lost`.
fn receipts(n: usize, lost: &[usize]) -> String {
    let at = (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(2)).to_string();
    let mut csv = String::from("key,amount,currency,status,at\n");
    for i in (0..n).filter(|i| !lost.contains(i)) {
        csv += &format!("sms-{i},5,USD,delivered,{at}\n");
    }
    csv
}

/// The window of the receipts: the last three hours up to one hour ago (fixed once per test
/// process, so that every invocation is the same reconciliation).
fn window() -> [String; 4] {
    static NOW: std::sync::OnceLock<jiff::Timestamp> = std::sync::OnceLock::new();
    let now = *NOW.get_or_init(jiff::Timestamp::now);
    [
        "--since".into(),
        (now - jiff::SignedDuration::from_hours(3)).to_string(),
        "--until".into(),
        (now - jiff::SignedDuration::from_hours(1)).to_string(),
    ]
}

/// `backstop reconcile sms.send --statement receipts.csv` with the window and `extra`.
fn args(extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["reconcile", "sms.send", "--statement", "receipts.csv"]
        .map(String::from)
        .to_vec();
    a.extend(window());
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn strs(a: &[String]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

fn redrives(events: &[backstop::Event]) -> usize {
    events
        .iter()
        .filter(|e| e.kind == EventType::Redriven)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_receipts_find_the_false_successes_and_apply_redrives_each_once() {
    let w = Workdir::new(CONFIG);
    let store = backstop::open_store(&w.db_url()).await.unwrap();
    let ids = sent(&store, 50).await;
    let lost = [3, 17, 42];
    std::fs::write(w.path().join("receipts.csv"), receipts(50, &lost)).unwrap();

    // Without --apply: the breaks, and nothing changes.
    let (ok, out, _) = w.run(&strs(&args(&["--json", "--grace", "1m"]))).await;
    assert!(!ok, "breaks exit non-zero");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["verdict"], "BREAKS");
    assert_eq!(report["counts"]["records_read"], 47);
    assert_eq!(report["counts"]["matched"], 47);
    assert_eq!(report["counts"]["missing_record"], 3);
    let mut missing: Vec<String> = report["breaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["key"].as_str().unwrap().to_string())
        .collect();
    missing.sort();
    assert_eq!(missing, ["sms-17", "sms-3", "sms-42"]);
    assert_eq!(
        store
            .counts(CountsParams {
                kind: Some("sms.send".into())
            })
            .await
            .unwrap()
            .succeeded,
        50,
        "a reconcile without --apply changes nothing"
    );

    // --apply: exactly the lost ones run again, recorded with the run.
    let apply = args(&["--apply", "--grace", "1m", "--report", "out"]);
    let (ok, out, err) = w.run(&strs(&apply)).await;
    assert!(!ok, "{err}");
    assert!(out.contains("re-driven 3 missing task(s) now"), "{out}");
    for (i, id) in ids.iter().enumerate() {
        let t = store.get(GetParams { id: *id }).await.unwrap().unwrap();
        let want = if lost.contains(&i) {
            Status::Pending
        } else {
            Status::Succeeded
        };
        assert_eq!(t.status, want, "sms-{i}");
        if lost.contains(&i) {
            let tl = store.timeline(TimelineParams { id: *id }).await.unwrap();
            assert_eq!(redrives(&tl), 1);
            let e = tl.iter().find(|e| e.kind == EventType::Redriven).unwrap();
            assert!(e.actor.as_deref().unwrap().starts_with("reconcile:st-"));
        }
    }
    for f in ["report.json", "breaks.csv", "malformed.csv", "summary.txt"] {
        assert!(w.path().join("out").join(f).exists(), "{f}");
    }
    let breaks = std::fs::read_to_string(w.path().join("out/breaks.csv")).unwrap();
    assert_eq!(
        breaks.lines().count(),
        4,
        "a header and three breaks:\n{breaks}"
    );

    // The same reconciliation again re-drives nothing twice.
    let (_, out, _) = w.run(&strs(&apply)).await;
    assert!(out.contains("re-driven 0 missing task(s) now"), "{out}");
    for i in lost {
        assert_eq!(
            redrives(&store.timeline(TimelineParams { id: ids[i] }).await.unwrap()),
            1
        );
    }
    // The handler swallows the failure again: the tasks read `succeeded` once more. The same
    // run still finds them missing, and does not re-drive them a second time.
    let now = jiff::Timestamp::now();
    succeed_again(&store).await;
    let until_now = {
        let mut a = apply.clone();
        let i = a.iter().position(|x| x == "--until").unwrap();
        a[i + 1] = (now + jiff::SignedDuration::from_mins(2)).to_string();
        a
    };
    let (_, out, _) = w.run(&strs(&until_now)).await;
    assert!(out.contains("missing_record 3"), "{out}");
    assert!(
        out.contains("re-driven 3 missing task(s) now"),
        "a new window is a new run: {out}"
    );
    succeed_again(&store).await;
    let (_, out, _) = w.run(&strs(&until_now)).await;
    assert!(
        out.contains("re-driven 0 missing task(s) now; 3 already"),
        "the same run never re-drives twice: {out}"
    );
    for i in lost {
        assert_eq!(
            redrives(&store.timeline(TimelineParams { id: ids[i] }).await.unwrap()),
            2
        );
    }
    let runs = store
        .statement_runs(StatementRunsParams {
            kind: Some("sms.send".into()),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(runs.len(), 2, "one record per reconciliation: {runs:?}");
    // The first run's second invocation: the re-driven tasks no longer claimed success.
    assert_eq!(runs[1].verdict.as_deref(), Some("RECONCILED"));
    assert_eq!(runs[1].applied, 3);
    assert_eq!(
        (runs[0].verdict.as_deref(), runs[0].applied),
        (Some("BREAKS"), 3)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incomplete_statement_applies_nothing() {
    let w = Workdir::new(CONFIG);
    let store = backstop::open_store(&w.db_url()).await.unwrap();
    sent(&store, 10).await;
    let mut csv = receipts(10, &[4]);
    csv += "sms-x,5.5,USD,delivered,2020-01-01T00:00:00Z\n";
    std::fs::write(w.path().join("receipts.csv"), csv).unwrap();
    let (ok, out, _) = w.run(&strs(&args(&["--apply", "--json"]))).await;
    assert!(!ok);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["verdict"], "INCOMPLETE");
    assert_eq!(report["counts"]["malformed"], 1);
    assert_eq!(
        store
            .counts(CountsParams {
                kind: Some("sms.send".into())
            })
            .await
            .unwrap()
            .succeeded,
        10
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_apply_resumes_and_redrives_each_task_once() {
    let w = Workdir::new(CONFIG);
    let store = backstop::open_store(&w.db_url()).await.unwrap();
    const N: usize = 4000;
    let ids = sent(&store, N).await;
    let lost: Vec<usize> = (0..N).filter(|i| i % 2 == 0).collect();
    std::fs::write(w.path().join("receipts.csv"), receipts(N, &lost)).unwrap();
    let apply = args(&["--apply"]);
    let mut child = tokio::process::Command::new(bin())
        .args(&apply)
        .current_dir(w.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once some, not all, of the re-drives are done.
    let mut pending = 0;
    for _ in 0..2000 {
        pending = store
            .counts(CountsParams {
                kind: Some("sms.send".into()),
            })
            .await
            .unwrap()
            .pending as usize;
        if pending > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    signal(&child, libc::SIGKILL);
    let _ = child.wait().await;
    let at_kill = store
        .counts(CountsParams {
            kind: Some("sms.send".into()),
        })
        .await
        .unwrap()
        .pending as usize;
    println!(
        "killed with {at_kill} of {} re-driven (saw {pending})",
        lost.len()
    );
    assert!(at_kill < lost.len(), "killed before the end");
    let (_, out, err) = w.run(&strs(&apply)).await;
    assert!(out.contains("re-driven"), "{out}{err}");
    let c = store
        .counts(CountsParams {
            kind: Some("sms.send".into()),
        })
        .await
        .unwrap();
    assert_eq!(c.pending as usize, lost.len());
    for i in lost.iter().step_by(40) {
        assert_eq!(
            redrives(
                &store
                    .timeline(TimelineParams { id: ids[*i] })
                    .await
                    .unwrap()
            ),
            1,
            "sms-{i}"
        );
    }
}

/// Tasks whose payloads carry an amount but no currency, succeeded two hours ago.
async fn sent_without_currency(store: &Arc<dyn Store>, n: usize) {
    let now = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(2);
    let tasks: Vec<NewTask> = (0..n)
        .map(|i| NewTask {
            id: TaskId::new(),
            kind: "sms.send".into(),
            key: format!("sms-{i}"),
            payload: format!(r#"{{"to":"+1555{i:07}","amount":5}}"#).into_bytes(),
            max_attempts: 5,
            run_at: now,
            expires_at: None,
            traceparent: None,
            intake: Default::default(),
            origin: None,
            group: None,
        })
        .collect();
    store.enqueue(EnqueueParams { tasks, now }).await.unwrap();
    claim_and_succeed(store, n, now).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amounts_that_could_not_be_compared_never_give_an_all_clear() {
    let w = Workdir::new(CONFIG);
    let store = backstop::open_store(&w.db_url()).await.unwrap();
    sent_without_currency(&store, 5).await;
    // The statement disagrees with the ledger on one amount only.
    let csv = receipts(5, &[]).replace("sms-3,5,USD", "sms-3,7,USD");
    std::fs::write(w.path().join("receipts.csv"), csv).unwrap();
    let (ok, out, _) = w.run(&strs(&args(&["--json"]))).await;
    assert!(!ok, "an unchecked amount is no all-clear");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["verdict"], "INCOMPLETE", "{report}");
    assert_eq!(report["counts"]["amount_unchecked"], 5);
    let why = report["incomplete_reasons"].to_string();
    assert!(why.contains("no ledger amount to compare"), "{why}");
    // With the ledger's currency given, the amounts are compared and the mismatch found.
    let (ok, out, _) = w.run(&strs(&args(&["--json", "--currency", "usd"]))).await;
    assert!(!ok);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["verdict"], "BREAKS", "{report}");
    assert_eq!(report["counts"]["amount_unchecked"], 0);
    assert_eq!(report["breaks"][0]["class"], "amount_mismatch", "{report}");
    let (ok, _, err) = w.run(&strs(&args(&["--currency", "U$D"]))).await;
    assert!(!ok);
    assert!(err.contains("--currency"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misspelled_kind_is_refused_and_records_no_run() {
    let w = Workdir::new(CONFIG);
    let store = backstop::open_store(&w.db_url()).await.unwrap();
    std::fs::write(w.path().join("receipts.csv"), receipts(1, &[])).unwrap();
    let mut a = args(&[]);
    a[1] = "sms.sned".into();
    let (ok, out, err) = w.run(&strs(&a)).await;
    assert!(!ok);
    assert!(
        err.contains("unknown kind \"sms.sned\"") && err.contains("sms.send"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
    let runs = store
        .statement_runs(StatementRunsParams {
            kind: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert!(runs.is_empty(), "no run recorded: {runs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_refused_for_its_header_closes_its_run_as_failed() {
    let w = Workdir::new(CONFIG);
    let store = backstop::open_store(&w.db_url()).await.unwrap();
    std::fs::write(w.path().join("receipts.csv"), "order,cents\nsms-1,5\n").unwrap();
    let (ok, _, err) = w.run(&strs(&args(&[]))).await;
    assert!(!ok);
    assert!(
        err.contains("key"),
        "the error names the missing column: {err}"
    );
    let runs = store
        .statement_runs(StatementRunsParams {
            kind: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(runs.len(), 1);
    assert!(runs[0].finished_at.is_some(), "the run is closed: {runs:?}");
    assert_eq!(runs[0].verdict.as_deref(), Some("FAILED"));
    let run = store
        .statement_run(StatementRunParams {
            id: runs[0].id.to_string(),
        })
        .await
        .unwrap()
        .unwrap();
    assert!(run.report.as_deref().unwrap().contains("error"), "{run:?}");
}
