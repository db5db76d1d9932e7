//! Pauses of a kind's dispatch: rows per scope and cause that never overwrite one another, a
//! breaker trip counted once however many processes report it, a `Retry-After` that only
//! moves later, resumes that clear what they name, and a history of all of it.

use crate::fixtures::*;
use backstop_core::pause::{PauseAction, PauseCause, PauseRecord, kind_scope};
use backstop_core::store::*;
use std::sync::Arc;

type S = Arc<dyn Store>;

fn pause(kind: &str, cause: PauseCause, until: Option<i64>, trips: u32, at_s: i64) -> PauseRecord {
    PauseRecord {
        scope: kind_scope(kind),
        cause,
        reason: format!("{cause} at {at_s}"),
        until: until.map(at),
        trips,
        by: "worker-1".into(),
        since: at(at_s),
    }
}

async fn write(store: &S, r: PauseRecord) -> bool {
    store.pause(PauseParams { record: r }).await.expect("pause")
}

async fn all(store: &S) -> Vec<PauseRecord> {
    store.pauses(PausesParams::default()).await.expect("pauses")
}

/// A manual pause, a breaker trip and a `Retry-After` on one kind are three rows that read
/// back field for field; another kind's pause is its own.
pub async fn pauses_of_each_cause_are_kept_side_by_side(store: S) {
    let manual = pause("a", PauseCause::Manual, None, 0, 1);
    let breaker = pause("a", PauseCause::Breaker, Some(31), 1, 1);
    let retry = pause("a", PauseCause::RetryAfter, Some(61), 0, 1);
    let other = pause("b", PauseCause::Manual, None, 0, 2);
    for r in [&manual, &breaker, &retry, &other] {
        assert!(write(&store, r.clone()).await, "{r:?} is new");
    }
    let mut rows = all(&store).await;
    rows.sort_by(|x, y| (&x.scope, x.cause).cmp(&(&y.scope, y.cause)));
    assert_eq!(rows, vec![manual, breaker, retry, other]);
}

/// Two processes reporting the same trip count it once; a later trip in a row replaces it;
/// a `Retry-After` that ends sooner than the stored one changes nothing; each write that
/// changed something is in the history, newest first, and nothing else is.
pub async fn a_trip_counts_once_and_a_retry_after_only_moves_later(store: S) {
    assert!(write(&store, pause("a", PauseCause::Breaker, Some(31), 1, 1)).await);
    assert!(
        !write(&store, pause("a", PauseCause::Breaker, Some(32), 1, 2)).await,
        "the same trip, from another process"
    );
    assert!(write(&store, pause("a", PauseCause::Breaker, Some(92), 2, 32)).await);
    assert!(write(&store, pause("a", PauseCause::RetryAfter, Some(100), 0, 40)).await);
    assert!(!write(&store, pause("a", PauseCause::RetryAfter, Some(90), 0, 41)).await);
    let rows = all(&store).await;
    let b = rows
        .iter()
        .find(|r| r.cause == PauseCause::Breaker)
        .unwrap();
    assert_eq!((b.trips, b.until), (2, Some(at(92))));
    let r = rows
        .iter()
        .find(|r| r.cause == PauseCause::RetryAfter)
        .unwrap();
    assert_eq!(r.until, Some(at(100)));
    let h = store
        .pause_history(PauseHistoryParams {
            scope: kind_scope("a"),
            limit: 10,
        })
        .await
        .expect("history");
    let seen: Vec<_> = h.iter().map(|e| (e.action, e.cause, e.at)).collect();
    assert_eq!(
        seen,
        vec![
            (PauseAction::Pause, PauseCause::RetryAfter, at(40)),
            (PauseAction::Pause, PauseCause::Breaker, at(32)),
            (PauseAction::Pause, PauseCause::Breaker, at(1)),
        ]
    );
}

/// A resume clears only the causes it names and records who and why; one that finds
/// nothing records nothing; the other kinds' pauses stay.
pub async fn a_resume_clears_what_it_names_and_is_recorded(store: S) {
    write(&store, pause("a", PauseCause::Manual, None, 0, 1)).await;
    write(&store, pause("a", PauseCause::Breaker, Some(31), 1, 1)).await;
    write(&store, pause("b", PauseCause::Breaker, Some(31), 1, 1)).await;
    let removed = store
        .resume(ResumeParams {
            scope: kind_scope("a"),
            causes: vec![PauseCause::Breaker, PauseCause::RetryAfter],
            reason: "probe succeeded".into(),
            by: "worker-2".into(),
            now: at(40),
        })
        .await
        .expect("resume");
    assert_eq!(removed.len(), 1);
    assert_eq!(removed[0].cause, PauseCause::Breaker);
    let left: Vec<_> = all(&store)
        .await
        .into_iter()
        .map(|r| (r.scope, r.cause))
        .collect();
    assert_eq!(
        left,
        vec![
            (kind_scope("a"), PauseCause::Manual),
            (kind_scope("b"), PauseCause::Breaker)
        ]
    );
    let nothing = store
        .resume(ResumeParams {
            scope: kind_scope("c"),
            causes: PauseCause::ALL.to_vec(),
            reason: "x".into(),
            by: "op".into(),
            now: at(41),
        })
        .await
        .expect("resume");
    assert!(nothing.is_empty());
    let h = store
        .pause_history(PauseHistoryParams {
            scope: kind_scope("a"),
            limit: 1,
        })
        .await
        .expect("history");
    assert_eq!(h.len(), 1, "the limit holds");
    let e = &h[0];
    assert_eq!(
        (e.action, e.cause, e.reason.as_str(), e.by.as_str(), e.at),
        (
            PauseAction::Resume,
            PauseCause::Breaker,
            "probe succeeded",
            "worker-2",
            at(40)
        )
    );
    let c = store
        .pause_history(PauseHistoryParams {
            scope: kind_scope("c"),
            limit: 10,
        })
        .await
        .expect("history");
    assert!(c.is_empty(), "{c:?}");
}

/// Processes tripping one breaker at once: every write succeeds or is refused cleanly, and
/// the row ends with the most trips any of them counted.
pub async fn concurrent_trips_keep_the_highest_count(store: S) {
    let mut handles = Vec::new();
    for i in 0..32u32 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let trips = 1 + i % 8;
            write(
                &store,
                pause(
                    "a",
                    PauseCause::Breaker,
                    Some(100 + i as i64),
                    trips,
                    i as i64,
                ),
            )
            .await
        }));
    }
    let mut written = 0;
    for h in handles {
        written += h.await.expect("joined") as u32;
    }
    assert!(written >= 1);
    let rows = all(&store).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].trips, 8);
}
