//! Manual actions: retry, resolve and cancel, recorded with who asked.

use crate::fixtures::*;
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, EventType, Status, StoreError, TaskId};
use std::sync::Arc;

type S = Arc<dyn Store>;

async fn dead_letter(store: &dyn Store, key: &str) -> TaskId {
    let mut t = task("k", key, "{}");
    t.max_attempts = 1;
    let id = put(store, t).await;
    let c = claim(store, "k", "w1", 1, at(0)).await.remove(0);
    let mut f = completion(&c, Status::Failed, AttemptOutcome::Failed, at(0));
    f.last_error = Some("HTTP 400: permanent".into());
    f.http_status = Some(400);
    complete(store, vec![f], at(1)).await;
    id
}

pub async fn manual_retry_renews_the_budget_and_records_the_actor(store: S) {
    let id = dead_letter(&*store, "dl").await;
    let t = store
        .retry(ManualParams {
            id,
            actor: "alice".into(),
            reason: None,
            max_attempts: None,
            now: at(5),
        })
        .await
        .unwrap();
    assert_eq!(t.status, Status::Pending);
    assert_eq!(t.run_at, at(5));
    assert!(t.max_attempts > t.attempts, "the attempt budget is renewed");
    let c = succeed_next(&*store, "k", at(5), at(6), at(6)).await;
    assert_eq!(c.attempt, 2);
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    let kinds: Vec<_> = tl.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            EventType::Created,
            EventType::Attempt,
            EventType::Retried,
            EventType::Attempt
        ]
    );
    assert_eq!(tl[1].outcome, Some(AttemptOutcome::Failed));
    assert_eq!(tl[1].http_status, Some(400));
    assert_eq!(tl[2].actor.as_deref(), Some("alice"));
    // Retrying a succeeded task is refused and changes nothing.
    let err = store
        .retry(ManualParams {
            id,
            actor: "alice".into(),
            reason: None,
            max_attempts: None,
            now: at(7),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::WrongStatus {
                status: Status::Succeeded,
                ..
            }
        ),
        "{err}"
    );
    let missing = TaskId::new();
    assert!(matches!(
        store.retry(ManualParams { id: missing, actor: "a".into(), reason: None, max_attempts: None, now: at(7) }).await,
        Err(StoreError::NotFound(m)) if m == missing
    ));
}

pub async fn resolve_and_cancel_follow_the_state_machine(store: S) {
    let id = dead_letter(&*store, "res").await;
    let t = store
        .resolve(ManualParams {
            id,
            actor: "bob".into(),
            reason: Some("refunded by hand".into()),
            max_attempts: None,
            now: at(9),
        })
        .await
        .unwrap();
    assert_eq!(t.status, Status::Compensated);
    assert_eq!(t.reason.as_deref(), Some("refunded by hand"));
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    let last = tl.last().unwrap();
    assert_eq!(last.kind, EventType::Resolved);
    assert_eq!(last.actor.as_deref(), Some("bob"));
    assert!(
        tl.iter().any(|e| e.kind == EventType::Attempt),
        "the failed attempt stays on the timeline"
    );
    // Resolving again is refused.
    assert!(matches!(
        store
            .resolve(ManualParams {
                id,
                actor: "bob".into(),
                reason: Some("x".into()),
                max_attempts: None,
                now: at(9)
            })
            .await,
        Err(StoreError::WrongStatus { .. })
    ));
    let p = put(&*store, task("k", "cancel-me", "{}")).await;
    let t = store
        .cancel(ManualParams {
            id: p,
            actor: "carol".into(),
            reason: None,
            max_attempts: None,
            now: at(10),
        })
        .await
        .unwrap();
    assert_eq!(t.status, Status::Compensated);
    assert_eq!(t.reason.as_deref(), Some("canceled"));
    assert!(claim(&*store, "k", "w", 10, at(100)).await.is_empty());
    assert!(matches!(
        store
            .cancel(ManualParams {
                id: p,
                actor: "carol".into(),
                reason: None,
                max_attempts: None,
                now: at(10)
            })
            .await,
        Err(StoreError::WrongStatus { .. })
    ));
}

/// A refused action locks its row before the state machine refuses it; the lock must be gone
/// when the refusal is answered, or a claim made right after it (claims skip locked rows)
/// would pass the task by. Repeated, because a lock left behind is released moments later.
pub async fn a_refused_manual_action_leaves_the_task_claimable(store: S) {
    for i in 0..40 {
        let id = put(&*store, task("k", &format!("refused-{i}"), "{}")).await;
        let refused = store
            .retry(ManualParams {
                id,
                actor: "alice".into(),
                reason: None,
                max_attempts: None,
                now: at(1),
            })
            .await;
        assert!(matches!(refused, Err(StoreError::WrongStatus { .. })));
        let claimed = claim(&*store, "k", "w", 10, at(2)).await;
        assert_eq!(
            claimed.iter().map(|c| c.id).collect::<Vec<_>>(),
            [id],
            "round {i}: the refused task is claimable at once"
        );
    }
}
