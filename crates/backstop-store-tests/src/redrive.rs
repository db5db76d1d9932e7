//! Cases of what statement reconciliation needs from a store: tasks looked up by many keys at
//! once, and a `succeeded` task re-driven with the run on its timeline.

use crate::fixtures::*;
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, EventType, Status, StoreError};
use std::sync::Arc;

type S = Arc<dyn Store>;

pub async fn tasks_are_looked_up_by_many_keys_at_once(store: S) {
    for k in ["a", "b", "c"] {
        put(&*store, task("sms", k, "{}")).await;
    }
    put(&*store, task("other", "a", "{}")).await;
    let mut found = store
        .tasks_by_keys(KeysParams {
            kind: "sms".into(),
            keys: vec!["c".into(), "a".into(), "missing".into(), "it's %_".into()],
        })
        .await
        .unwrap();
    found.sort_by(|a, b| a.key.cmp(&b.key));
    let keys: Vec<_> = found
        .iter()
        .map(|t| (t.kind.as_str(), t.key.as_str()))
        .collect();
    assert_eq!(keys, [("sms", "a"), ("sms", "c")]);
    let none = store
        .tasks_by_keys(KeysParams {
            kind: "sms".into(),
            keys: vec![],
        })
        .await
        .unwrap();
    assert!(none.is_empty());
}

pub async fn a_succeeded_task_is_redriven_with_the_run_on_its_timeline(store: S) {
    let id = put(&*store, task("sms", "order-1", "{}")).await;
    succeed_next(&*store, "sms", at(0), at(0), at(1)).await;
    let params = |id| ManualParams {
        id,
        actor: "reconcile:run-1".into(),
        reason: Some("missing_record: the provider has no record".into()),
        max_attempts: None,
        now: at(10),
    };
    let t = store.redrive(params(id)).await.unwrap();
    assert_eq!((t.status, t.run_at), (Status::Pending, at(10)));
    assert!(t.max_attempts > t.attempts, "a fresh attempt budget");
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    let kinds: Vec<_> = tl.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [EventType::Created, EventType::Attempt, EventType::Redriven]
    );
    assert_eq!(tl[1].outcome, Some(AttemptOutcome::Succeeded));
    assert_eq!(tl[2].actor.as_deref(), Some("reconcile:run-1"));
    // Only succeeded tasks: now it is pending.
    match store.redrive(params(id)).await {
        Err(StoreError::WrongStatus { status, .. }) => assert_eq!(status, Status::Pending),
        other => panic!("expected WrongStatus, got {other:?}"),
    }
    let c = claim(&*store, "sms", "w1", 1, at(10)).await.remove(0);
    assert_eq!(c.attempt, 2);
}

pub async fn statement_runs_are_recorded_and_listed_newest_first(store: S) {
    let run = |id: &str, kind: &str, secs: i64| StatementRun {
        id: id.into(),
        kind: kind.into(),
        statement: "receipts.csv".into(),
        started_at: at(secs),
        finished_at: None,
        verdict: None,
        applied: 0,
        report: None,
    };
    store
        .record_statement_run(RecordStatementRunParams {
            run: run("r1", "sms", 1),
        })
        .await
        .unwrap();
    store
        .record_statement_run(RecordStatementRunParams {
            run: run("r2", "sms", 2),
        })
        .await
        .unwrap();
    store
        .record_statement_run(RecordStatementRunParams {
            run: run("r3", "pay", 3),
        })
        .await
        .unwrap();
    let mut done = run("r1", "sms", 1);
    done.finished_at = Some(at(5));
    done.verdict = Some("BREAKS".into());
    done.applied = 7;
    done.report = Some(r#"{"verdict":"BREAKS"}"#.into());
    store
        .record_statement_run(RecordStatementRunParams { run: done.clone() })
        .await
        .unwrap();
    assert_eq!(
        store
            .statement_run(StatementRunParams { id: "r1".into() })
            .await
            .unwrap(),
        Some(done)
    );
    assert_eq!(
        store
            .statement_run(StatementRunParams { id: "nope".into() })
            .await
            .unwrap(),
        None
    );
    let sms = store
        .statement_runs(StatementRunsParams {
            kind: Some("sms".into()),
            limit: 10,
        })
        .await
        .unwrap();
    let ids: Vec<_> = sms.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["r2", "r1"]);
    assert_eq!(sms[1].report, None, "listings leave the report out");
    let all = store
        .statement_runs(StatementRunsParams {
            kind: None,
            limit: 2,
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].id, "r3");
}

pub async fn scans_walk_one_kind_and_status_in_id_order(store: S) {
    let mut done = Vec::new();
    for i in 0..5 {
        let id = put(&*store, task("sms", &format!("k{i}"), "{}")).await;
        succeed_next(&*store, "sms", at(0), at(0), at(1)).await;
        done.push(id);
    }
    put(&*store, task("sms", "waiting", "{}")).await;
    put(&*store, task("other", "k0", "{}")).await;
    done.sort();
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .scan(ScanParams {
                kind: "sms".into(),
                status: Status::Succeeded,
                after,
                limit: 2,
            })
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().map(|t| t.id);
        seen.extend(page.iter().map(|t| t.id));
    }
    assert_eq!(seen, done);
}
