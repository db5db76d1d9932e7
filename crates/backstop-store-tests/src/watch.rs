//! Cases of what the reconciler reads and writes about the ledger as a whole: beats, the
//! backlog per kind, and audit pages whose timelines agree with their statuses.

use crate::fixtures::*;
use backstop_core::audit::audit;
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, Status, TaskId};
use jiff::SignedDuration;
use std::sync::Arc;

type S = Arc<dyn Store>;

async fn beat(store: &dyn Store, name: &str, owner: &str, secs: i64, detail: &str) {
    store
        .beat(BeatParams {
            name: name.into(),
            owner: owner.into(),
            at: at(secs),
            detail: detail.into(),
        })
        .await
        .expect("beat");
}

pub async fn beats_are_overwritten_by_name_and_listed_by_prefix(store: S) {
    beat(&*store, "node:a", "a", 1, r#"{"kinds":["x"]}"#).await;
    beat(&*store, "node:b", "b", 2, "{}").await;
    beat(&*store, "reconciler", "a", 3, "{}").await;
    beat(&*store, "node:a", "a", 4, r#"{"kinds":["x","y"]}"#).await;
    // `_` and `%` are not wildcards in a prefix.
    beat(&*store, "nodeXa", "z", 4, "{}").await;
    let nodes = store
        .beats(BeatsParams {
            prefix: "node:".into(),
        })
        .await
        .unwrap();
    let names: Vec<_> = nodes.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["node:a", "node:b"]);
    assert_eq!(nodes[0].at, at(4), "the latest beat wins");
    assert_eq!(nodes[0].detail, r#"{"kinds":["x","y"]}"#);
    assert!(
        store
            .beats(BeatsParams {
                prefix: "node_".into()
            })
            .await
            .unwrap()
            .is_empty()
    );
    let r = store
        .beats(BeatsParams {
            prefix: "reconciler".into(),
        })
        .await
        .unwrap();
    assert_eq!((r[0].owner.as_str(), r[0].at), ("a", at(3)));
    let gone = store
        .forget_beats(ForgetBeatsParams {
            prefix: "node:".into(),
            before: at(3),
        })
        .await
        .unwrap();
    assert_eq!(gone, 1, "only node:b is stale");
    let names: Vec<_> = store
        .beats(BeatsParams { prefix: "".into() })
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.name)
        .collect();
    assert_eq!(names, ["node:a", "nodeXa", "reconciler"]);
}

pub async fn backlog_counts_pending_due_overdue_and_running_per_kind(store: S) {
    let mut old = Vec::new();
    for i in 0..3 {
        old.push(put(&*store, task("a", &format!("old{i}"), "{}")).await);
    }
    let mut later = task("a", "later", "{}");
    later.run_at = at(100);
    put(&*store, later).await;
    let mut recent = task("a", "recent", "{}");
    recent.run_at = at(55);
    put(&*store, recent).await;
    put(&*store, task("b", "running", "{}")).await;
    claim(&*store, "b", "w1", 1, at(0)).await;
    let done = put(&*store, task("c", "done", "{}")).await;
    let c = succeed_next(&*store, "c", at(0), at(0), at(1)).await;
    assert_eq!(c.id, done);
    let b = store
        .backlog(BacklogParams {
            now: at(60),
            overdue_before: at(50),
            sample: 2,
        })
        .await
        .unwrap();
    let kinds: Vec<_> = b.iter().map(|k| k.kind.as_str()).collect();
    assert_eq!(kinds, ["a", "b"], "finished kinds have no backlog");
    let a = &b[0];
    assert_eq!((a.pending, a.due, a.overdue, a.running), (5, 4, 3, 0));
    assert_eq!(a.oldest_run_at, Some(t0()));
    assert_eq!(a.overdue_sample.len(), 2, "sampled up to the limit");
    assert!(a.overdue_sample.iter().all(|id| old.contains(id)));
    let r = &b[1];
    assert_eq!((r.pending, r.running, r.overdue), (0, 1, 0));
    assert!(r.overdue_sample.is_empty());
}

pub async fn audit_pages_walk_the_ledger_in_id_order(store: S) {
    let mut ids: Vec<TaskId> = Vec::new();
    for i in 0..7 {
        ids.push(put(&*store, task("k", &format!("t{i}"), "{}")).await);
    }
    ids.sort();
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .audit_page(AuditParams { after, limit: 3 })
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 3);
        for (t, tl) in &page {
            assert!(!tl.is_empty(), "each task comes with its timeline");
            seen.push(t.id);
        }
        after = page.last().map(|(t, _)| t.id);
    }
    assert_eq!(seen, ids);
}

/// Every path through the state machine leaves a ledger that the conservation audit finds
/// consistent: the audit must not cry wolf on any store.
pub async fn a_ledger_driven_through_every_transition_audits_clean(store: S) {
    let s = &*store;
    // succeeded after a retry
    put(s, task("k", "retried-then-ok", "{}")).await;
    let c = claim(s, "k", "w1", 1, at(0)).await.remove(0);
    let mut r = completion(&c, Status::Pending, AttemptOutcome::Retry, at(0));
    r.run_at = Some(at(1));
    r.last_error = Some("503".into());
    complete(s, vec![r], at(0)).await;
    succeed_next(s, "k", at(2), at(2), at(2)).await;
    // failed, permanent
    put(s, task("k", "failed", "{}")).await;
    let c = claim(s, "k", "w1", 1, at(3)).await.remove(0);
    let mut f = completion(&c, Status::Failed, AttemptOutcome::Failed, at(3));
    f.reason = Some("permanent error".into());
    f.last_error = Some("400".into());
    complete(s, vec![f], at(3)).await;
    // skipped
    put(s, task("k", "skipped", "{}")).await;
    let c = claim(s, "k", "w1", 1, at(4)).await.remove(0);
    let mut k = completion(&c, Status::Compensated, AttemptOutcome::Skipped, at(4));
    k.reason = Some("campaign over".into());
    complete(s, vec![k], at(4)).await;
    // rescued after a crash, then running again
    let mut lost = task("k", "lost", "{}");
    lost.run_at = at(5);
    put(s, lost).await;
    claim(s, "k", "crashed", 1, at(5)).await;
    s.rescue(RescueParams {
        now: at(40),
        limit: 10,
    })
    .await
    .unwrap();
    claim(s, "k", "w2", 1, at(41)).await;
    // expired, canceled, pending
    let mut exp = task("k", "expired", "{}");
    exp.run_at = at(100);
    exp.expires_at = Some(at(50));
    put(s, exp).await;
    s.expire(ExpireParams {
        now: at(60),
        limit: 10,
    })
    .await
    .unwrap();
    let mut cancel = task("k", "canceled", "{}");
    cancel.run_at = at(1000);
    let cancel = put(s, cancel).await;
    s.cancel(ManualParams {
        id: cancel,
        actor: "alice".into(),
        reason: None,
        max_attempts: None,
        now: at(61),
    })
    .await
    .unwrap();
    let mut waiting = task("k", "waiting", "{}");
    waiting.run_at = at(1000);
    put(s, waiting).await;
    // a dead letter retried by hand and resolved by hand
    let mut dl = task("d", "dead", "{}");
    dl.max_attempts = 1;
    dl.run_at = at(70);
    let dl = put(s, dl).await;
    let c = claim(s, "d", "w1", 1, at(70)).await.remove(0);
    let mut f = completion(&c, Status::Failed, AttemptOutcome::Failed, at(70));
    f.reason = Some("permanent error".into());
    complete(s, vec![f], at(70)).await;
    let manual = |id| ManualParams {
        id,
        actor: "bob".into(),
        reason: Some("refunded by hand".into()),
        max_attempts: None,
        now: at(80) + SignedDuration::from_millis(1),
    };
    s.retry(manual(dl)).await.unwrap();
    let c = claim(s, "d", "w1", 1, at(81)).await.remove(0);
    let mut f = completion(&c, Status::Failed, AttemptOutcome::Failed, at(81));
    f.reason = Some("permanent error".into());
    complete(s, vec![f], at(81)).await;
    s.resolve(manual(dl)).await.unwrap();

    let page = s
        .audit_page(AuditParams {
            after: None,
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(page.len(), 8);
    for (t, tl) in &page {
        let drift = audit(t, tl);
        assert!(
            drift.is_empty(),
            "{} ({}): {drift:?}\n{tl:?}",
            t.key,
            t.status
        );
    }
}

/// Tasks retried over and over (held, started, retried, claimed again) while the audit reads
/// the ledger: every page must be one consistent view, so a healthy ledger raises no drift
/// however its writes interleave with the audit's reads.
pub async fn a_retry_storm_audits_without_drift(store: S) {
    const TASKS: usize = 8;
    let s = &*store;
    for i in 0..TASKS {
        let mut t = task("storm", &format!("s{i}"), "{}");
        t.max_attempts = 1_000_000;
        put(s, t).await;
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = {
        let (store, stop) = (store.clone(), stop.clone());
        tokio::spawn(async move {
            let mut rounds = 0u64;
            let mut secs = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                secs += 1;
                let now = at(secs);
                // Half start at the claim, half are held and started after.
                let got =
                    crate::holds::claim_holding(&*store, "storm", "w1", TASKS, TASKS / 2, now)
                        .await;
                let held: Vec<&ClaimedTask> = got.iter().filter(|c| !c.started).collect();
                let lost = crate::holds::start(&*store, "w1", &held, now).await;
                assert!(lost.is_empty());
                let retries = got
                    .iter()
                    .map(|c| {
                        let mut r = completion(c, Status::Pending, AttemptOutcome::Retry, now);
                        r.run_at = Some(now);
                        r.last_error = Some("503".into());
                        r
                    })
                    .collect();
                complete(&*store, retries, now).await;
                rounds += 1;
            }
            rounds
        })
    };
    let mut audited = 0;
    let mut found = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(2500);
    while std::time::Instant::now() < deadline {
        let mut after = None;
        loop {
            let page = store
                .audit_page(AuditParams { after, limit: 3 })
                .await
                .unwrap();
            if page.is_empty() {
                break;
            }
            for (t, tl) in &page {
                audited += 1;
                found.extend(audit(t, tl));
            }
            after = page.last().map(|(t, _)| t.id);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = worker.await.unwrap();
    assert!(rounds > 5, "the storm ran only {rounds} rounds");
    assert!(
        found.is_empty(),
        "{} false drifts in {audited} audited tasks over {rounds} retry rounds: {:?}",
        found.len(),
        &found[..found.len().min(3)]
    );
}

/// A real drift, written behind the store's back by `inject` (which must add one to the
/// given task's attempt counter), is still found: reading each page in one snapshot hides
/// nothing that is really there.
pub async fn an_injected_drift_is_found<F>(store: S, inject: F)
where
    F: FnOnce(TaskId) -> BoxFuture<'static, ()>,
{
    let s = &*store;
    for i in 0..3 {
        put(s, task("drift", &format!("d{i}"), "{}")).await;
    }
    let bad = succeed_next(s, "drift", at(0), at(0), at(1)).await.id;
    let page = s
        .audit_page(AuditParams {
            after: None,
            limit: 10,
        })
        .await
        .unwrap();
    let before: Vec<_> = page.iter().flat_map(|(t, tl)| audit(t, tl)).collect();
    assert!(before.is_empty(), "{before:?}");
    inject(bad).await;
    let page = s
        .audit_page(AuditParams {
            after: None,
            limit: 10,
        })
        .await
        .unwrap();
    let found: Vec<_> = page.iter().flat_map(|(t, tl)| audit(t, tl)).collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].id, found[0].rule),
        (bad, backstop_core::audit::DriftRule::AttemptsMismatch)
    );
}

pub async fn the_write_probe_passes_and_leaves_nothing(store: S) {
    store
        .check_writable()
        .await
        .expect("a migrated ledger takes writes");
    store.check_writable().await.expect("and again");
    assert!(
        store
            .beats(BeatsParams { prefix: "".into() })
            .await
            .unwrap()
            .is_empty(),
        "the probe's row is rolled back"
    );
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap(),
        StatusCounts::default()
    );
    put(&*store, task("k", "after-probe", "{}")).await;
}
