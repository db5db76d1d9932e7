//! Limits per target host: a claim of one of a host's kinds takes a task only while fewer than
//! `max` tasks of all the host's kinds run with a live lease, counted from the ledger.

use crate::fixtures::*;
use backstop_core::limit::{HostMax, PerKey};
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, NewTask, Status, Store};
use jiff::{SignedDuration, Timestamp};
use std::sync::Arc;

type S = Arc<dyn Store>;

/// At most `max` running across kinds `ha` and `hb`.
fn on_host(max: u32) -> PerKey {
    PerKey {
        concurrency: None,
        rate: None,
        host: Some(HostMax {
            host: "warehouse.internal".into(),
            kinds: vec!["ha".into(), "hb".into()],
            max,
        }),
    }
}

/// Claims (and starts) up to `n` tasks of `kind` at `now`, under the host's limit of `max`
/// (`None`: unlimited, as a kind configured before the limit was).
async fn claim_of(
    store: &dyn Store,
    kind: &str,
    n: usize,
    now: Timestamp,
    max: Option<u32>,
) -> Vec<ClaimedTask> {
    store
        .claim(ClaimParams {
            kind: kind.into(),
            limit: n,
            start: n,
            owner: format!("w-{kind}"),
            now,
            lease_until: now + SignedDuration::from_secs(30),
            max_attempts: 3,
            on_group_failure: Default::default(),
            per_key: max.map(on_host),
        })
        .await
        .expect("claim")
}

fn tasks_of(kind: &str, n: usize) -> Vec<NewTask> {
    (0..n)
        .map(|i| task(kind, &format!("{kind}-{i}"), "{}"))
        .collect()
}

pub async fn a_host_limit_counts_every_kind_on_the_host(store: S) {
    let mut all = tasks_of("ha", 4);
    all.extend(tasks_of("hb", 4));
    all.extend(tasks_of("elsewhere", 3));
    put_all(&*store, all, t0()).await;
    // Two of ha's run from before the limit was configured: no key on their rows, and they
    // count all the same.
    let before = claim_of(&*store, "ha", 2, at(1), None).await;
    assert_eq!(before.len(), 2);
    let b = claim_of(&*store, "hb", 10, at(2), Some(3)).await;
    assert_eq!(b.len(), 1, "3 on the host, 2 of them ha's");
    assert!(b.iter().all(|c| c.started), "a limited claim holds nothing");
    assert!(
        claim_of(&*store, "ha", 10, at(2), Some(3)).await.is_empty(),
        "the host is full for every kind on it"
    );
    assert_eq!(
        claim_of(&*store, "elsewhere", 10, at(2), None).await.len(),
        3,
        "a kind on another host is not counted"
    );
    // One of ha's ends: one slot frees, for either kind.
    complete(
        &*store,
        vec![completion(
            &before[0],
            Status::Succeeded,
            AttemptOutcome::Succeeded,
            at(3),
        )],
        at(3),
    )
    .await;
    assert_eq!(claim_of(&*store, "ha", 10, at(4), Some(3)).await.len(), 1);
    assert!(claim_of(&*store, "hb", 10, at(4), Some(3)).await.is_empty());
    // Every lease has lapsed (the holders died): the whole host is free again.
    let later = at(40);
    assert_eq!(claim_of(&*store, "hb", 10, later, Some(3)).await.len(), 3);
}

pub async fn concurrent_host_claims_never_exceed_the_max(store: S) {
    let mut all = tasks_of("ha", 30);
    all.extend(tasks_of("hb", 30));
    put_all(&*store, all, t0()).await;
    let claimers: Vec<_> = (0..6)
        .map(|w| {
            let store = store.clone();
            let kind = if w % 2 == 0 { "ha" } else { "hb" };
            tokio::spawn(async move {
                let mut n = 0;
                for _ in 0..5 {
                    n += claim_of(&*store, kind, 3, at(1), Some(5)).await.len();
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for c in claimers {
        total += c.await.unwrap();
    }
    assert_eq!(total, 5, "five running across both kinds, never more");
    let counts = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(counts.running, 5);
}
