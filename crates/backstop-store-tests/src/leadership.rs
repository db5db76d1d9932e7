//! Cases of leadership leases: the election of the one process that runs the singleton
//! duties.

use crate::fixtures::*;
use backstop_core::store::*;
use jiff::{SignedDuration, Timestamp};
use std::sync::Arc;

type S = Arc<dyn Store>;

/// Asks for leadership `name` for `owner` at `now`, until `until`.
async fn acquire(
    store: &dyn Store,
    name: &str,
    owner: &str,
    now: Timestamp,
    until: Timestamp,
) -> Leadership {
    store
        .acquire_leadership(LeadershipParams {
            name: name.into(),
            owner: owner.into(),
            now,
            until,
        })
        .await
        .expect("acquire leadership")
}

async fn resign(store: &dyn Store, name: &str, owner: &str) -> bool {
    store
        .resign_leadership(ResignParams {
            name: name.into(),
            owner: owner.into(),
        })
        .await
        .expect("resign leadership")
}

fn held(owner: &str, since: Timestamp, until: Timestamp) -> Leadership {
    Leadership {
        owner: owner.into(),
        until,
        since,
    }
}

pub async fn leadership_is_refused_to_another_owner_while_valid(store: S) {
    let a = acquire(&*store, "duties", "a", t0(), at(5)).await;
    assert_eq!(a, held("a", t0(), at(5)), "a free leadership is granted");
    assert!(a.held_by("a") && !a.held_by("b"));
    let b = acquire(&*store, "duties", "b", at(1), at(6)).await;
    assert_eq!(b, a, "b is refused and told who holds it");
    let last = at(5) - SignedDuration::from_millis(1);
    let b = acquire(&*store, "duties", "b", last, at(10)).await;
    assert_eq!(b, a, "valid until its last millisecond");
    let other = acquire(&*store, "other duties", "b", at(1), at(6)).await;
    assert_eq!(
        other,
        held("b", at(1), at(6)),
        "another name is another leadership"
    );
}

pub async fn leadership_passes_on_after_expiry(store: S) {
    acquire(&*store, "duties", "a", t0(), at(5)).await;
    let b = acquire(&*store, "duties", "b", at(5), at(10)).await;
    assert_eq!(
        b,
        held("b", at(5), at(10)),
        "a lease that ran out is taken over"
    );
    let a = acquire(&*store, "duties", "a", at(6), at(11)).await;
    assert_eq!(a, b, "the old holder is refused once it lost it");
}

pub async fn leadership_renewal_by_the_holder_extends_it(store: S) {
    acquire(&*store, "duties", "a", t0(), at(5)).await;
    let renewed = acquire(&*store, "duties", "a", at(3), at(8)).await;
    assert_eq!(
        renewed,
        held("a", t0(), at(8)),
        "renewal extends and keeps since"
    );
    let b = acquire(&*store, "duties", "b", at(6), at(11)).await;
    assert_eq!(b, renewed, "refused within the extended lease");
    let late = acquire(&*store, "duties", "a", at(9), at(14)).await;
    assert_eq!(
        late,
        held("a", t0(), at(14)),
        "a holder renews a lapsed lease nobody took"
    );
}

pub async fn resigned_leadership_is_taken_at_once(store: S) {
    acquire(&*store, "duties", "a", t0(), at(5)).await;
    assert!(
        !resign(&*store, "duties", "b").await,
        "only the holder resigns"
    );
    let b = acquire(&*store, "duties", "b", at(1), at(6)).await;
    assert_eq!(b, held("a", t0(), at(5)), "still held by a");
    assert!(resign(&*store, "duties", "a").await);
    let b = acquire(&*store, "duties", "b", at(1), at(6)).await;
    assert_eq!(b, held("b", at(1), at(6)), "taken at once after resigning");
    assert!(
        !resign(&*store, "duties", "a").await,
        "a no longer holds it"
    );
    assert!(!resign(&*store, "nobody's", "a").await);
}

pub async fn racing_owners_elect_exactly_one(store: S) {
    const OWNERS: usize = 8;
    for (round, now) in [(0, t0()), (1, at(5)), (2, at(10))] {
        let start = Arc::new(tokio::sync::Barrier::new(OWNERS));
        let racers: Vec<_> = (0..OWNERS)
            .map(|i| {
                let (store, start) = (store.clone(), start.clone());
                tokio::spawn(async move {
                    let me = format!("r{round}-{i}");
                    start.wait().await;
                    let got = acquire(
                        &*store,
                        "duties",
                        &me,
                        now,
                        now + SignedDuration::from_secs(5),
                    )
                    .await;
                    (me, got)
                })
            })
            .collect();
        let mut results = Vec::new();
        for r in racers {
            results.push(r.await.expect("racer"));
        }
        let winners: Vec<_> = results.iter().filter(|(me, got)| got.held_by(me)).collect();
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one wins: {results:?}"
        );
        let winner = &winners[0].1;
        assert_eq!(winner.since, now, "round {round}");
        for (me, got) in &results {
            assert_eq!(got, winner, "round {round}: {me} is told the winner");
        }
    }
}
