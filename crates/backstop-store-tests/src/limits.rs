//! Limits per key: a limited claim takes a task only while its key has fewer than `max` running
//! tasks with a live lease, counted from the ledger, never from a counter; and only while its
//! key's rate allows a start, moving the task to when it will otherwise.

use crate::fixtures::*;
use backstop_core::limit::{KeyMax, KeyRate, PerKey, RateSpec};
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, NewTask, Status, Store};
use jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;
use std::sync::Arc;

type S = Arc<dyn Store>;

/// A task of kind `k` for `tenant` (`None`: a payload without the key).
fn of(key: &str, tenant: Option<&str>) -> NewTask {
    let payload = match tenant {
        Some(t) => format!(r#"{{"tenant":"{t}"}}"#),
        None => "{}".to_string(),
    };
    task("k", key, &payload)
}

/// At most `max` running per tenant.
fn per_tenant(max: u32) -> PerKey {
    PerKey {
        concurrency: Some(KeyMax {
            pointer: "/tenant".into(),
            max,
        }),
        rate: None,
        host: None,
    }
}

/// At most `limit` starts per second per tenant, `burst` at once.
fn rate_per_tenant(limit: u32, burst: u32) -> PerKey {
    PerKey {
        concurrency: None,
        rate: Some(KeyRate {
            pointer: "/tenant".into(),
            spec: RateSpec {
                limit,
                period: std::time::Duration::from_secs(1),
                burst,
            },
        }),
        host: None,
    }
}

/// Claims (and starts) up to `n` tasks of `k` at `now` under a limit of `max` per tenant.
async fn claim_limited(
    store: &dyn Store,
    owner: &str,
    n: usize,
    now: Timestamp,
    max: u32,
) -> Vec<ClaimedTask> {
    claim_under(store, owner, n, now, per_tenant(max)).await
}

/// A claim of up to `n` tasks of `k` at `now` under `limits`, all started.
fn limited_claim(owner: &str, n: usize, now: Timestamp, limits: PerKey) -> ClaimParams {
    ClaimParams {
        kind: "k".into(),
        limit: n,
        start: n,
        owner: owner.into(),
        now,
        lease_until: now + SignedDuration::from_secs(30),
        max_attempts: 3,
        on_group_failure: Default::default(),
        per_key: Some(limits),
    }
}

/// Claims (and starts) up to `n` tasks of `k` at `now` under `limits`.
async fn claim_under(
    store: &dyn Store,
    owner: &str,
    n: usize,
    now: Timestamp,
    limits: PerKey,
) -> Vec<ClaimedTask> {
    store
        .claim(limited_claim(owner, n, now, limits))
        .await
        .expect("limited claim")
}

fn tenant_of(c: &ClaimedTask) -> String {
    per_tenant(1)
        .keys_of(&c.payload)
        .0
        .expect("a concurrency key")
}

async fn enqueue_all(store: &dyn Store, tasks: Vec<NewTask>) {
    store
        .enqueue(EnqueueParams { tasks, now: t0() })
        .await
        .unwrap();
}

pub async fn a_limited_claim_takes_only_keys_with_a_free_slot(store: S) {
    let mut tasks = Vec::new();
    for (i, tenant) in ["a", "a", "b", "a", "b"].iter().enumerate() {
        let mut t = of(&format!("t{i}"), Some(tenant));
        t.run_at = at(i as i64);
        tasks.push(t);
    }
    let mut bare = of("bare", None);
    bare.run_at = at(5);
    tasks.push(bare);
    enqueue_all(&*store, tasks).await;
    let first = claim_limited(&*store, "w1", 10, at(10), 1).await;
    let keys: Vec<&str> = first.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(
        keys,
        ["t0", "t2", "bare"],
        "the oldest of each key, and a payload without the key under the shared one"
    );
    assert!(
        first.iter().all(|c| c.started),
        "a limited claim holds nothing"
    );
    assert!(
        claim_limited(&*store, "w2", 10, at(10), 1).await.is_empty(),
        "every key is full"
    );
    // t0 ends: a's slot is free, and a's next task is claimed.
    complete(
        &*store,
        vec![completion(
            &first[0],
            Status::Succeeded,
            AttemptOutcome::Succeeded,
            at(11),
        )],
        at(11),
    )
    .await;
    let next = claim_limited(&*store, "w2", 10, at(12), 1).await;
    let keys: Vec<&str> = next.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["t1"]);
}

pub async fn a_limited_claim_starts_at_most_what_it_may_start(store: S) {
    let tasks = (0..6)
        .map(|i| of(&format!("t{i}"), Some(&format!("x{i}"))))
        .collect();
    enqueue_all(&*store, tasks).await;
    let c = store
        .claim(ClaimParams {
            kind: "k".into(),
            limit: 6,
            start: 2,
            owner: "w1".into(),
            now: at(1),
            lease_until: at(31),
            max_attempts: 3,
            on_group_failure: Default::default(),
            per_key: Some(per_tenant(5)),
        })
        .await
        .unwrap();
    assert_eq!(c.len(), 2, "only as many as start");
    assert!(c.iter().all(|c| c.started && c.attempt == 1));
    let counts = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!((counts.running, counts.pending), (2, 4));
}

pub async fn a_lapsed_lease_frees_its_slot(store: S) {
    enqueue_all(&*store, vec![of("t0", Some("a")), of("t1", Some("a"))]).await;
    let first = claim_limited(&*store, "w1", 5, at(1), 1).await;
    assert_eq!(first.len(), 1);
    assert!(
        claim_limited(&*store, "w2", 5, at(30), 1).await.is_empty(),
        "the lease (to 31 s) still holds a's slot"
    );
    // The holder died: nobody ended its attempt, nothing was rescued, and yet its slot is free
    // once its lease has lapsed.
    let second = claim_limited(&*store, "w2", 5, at(32), 1).await;
    assert_eq!(
        second.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(),
        ["t1"]
    );
}

pub async fn a_full_key_does_not_starve_the_others(store: S) {
    // 300 of a's tasks are due first; b's five come after them.
    let mut tasks: Vec<NewTask> = (0..300)
        .map(|i| {
            let mut t = of(&format!("a{i}"), Some("a"));
            t.run_at = at(1);
            t
        })
        .collect();
    tasks.extend((0..5).map(|i| {
        let mut t = of(&format!("b{i}"), Some("b"));
        t.run_at = at(2);
        t
    }));
    enqueue_all(&*store, tasks).await;
    let c = claim_limited(&*store, "w1", 10, at(3), 2).await;
    let mut per: HashMap<String, usize> = HashMap::new();
    for t in &c {
        *per.entry(tenant_of(t)).or_default() += 1;
    }
    assert_eq!(per.get("a"), Some(&2), "{per:?}");
    assert_eq!(per.get("b"), Some(&2), "b's tasks past a's 300: {per:?}");
}

pub async fn concurrent_limited_claims_never_exceed_the_max(store: S) {
    let tasks = (0..60)
        .map(|i| of(&format!("t{i}"), Some(&format!("k{}", i % 5))))
        .collect();
    enqueue_all(&*store, tasks).await;
    let claimers: Vec<_> = (0..4)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for _ in 0..10 {
                    mine.extend(claim_limited(&*store, &format!("w{w}"), 3, at(1), 2).await);
                }
                mine
            })
        })
        .collect();
    let mut per: HashMap<String, usize> = HashMap::new();
    for c in claimers {
        for t in c.await.unwrap() {
            *per.entry(tenant_of(&t)).or_default() += 1;
        }
    }
    assert_eq!(per.len(), 5, "{per:?}");
    assert!(
        per.values().all(|n| *n == 2),
        "two per key, never more: {per:?}"
    );
}

fn keys(c: &[ClaimedTask]) -> Vec<&str> {
    c.iter().map(|c| c.key.as_str()).collect()
}

pub async fn a_rate_limited_key_starts_its_burst_and_moves_the_rest_with_an_event(store: S) {
    let mut tasks: Vec<NewTask> = (0..5)
        .map(|i| {
            let mut t = of(&format!("a{i}"), Some("a"));
            t.run_at = at(i);
            t
        })
        .collect();
    let mut b = of("b0", Some("b"));
    b.run_at = at(5);
    tasks.push(b);
    enqueue_all(&*store, tasks).await;
    let now = at(10);
    let ms = |n: i64| now + SignedDuration::from_millis(n);
    // 10 per second, 2 at once: a0 and a1 start, a2..a4 are moved 100 ms apart, b0 starts.
    let first = claim_under(&*store, "w1", 10, now, rate_per_tenant(10, 2)).await;
    assert_eq!(keys(&first), ["a0", "a1", "b0"]);
    // A claim that waited for the kind's lock decides at `now` plus that wait (whole ms), so
    // the moved times are read back rather than assumed exact to the millisecond.
    let mut due = Vec::new();
    for key in ["a2", "a3", "a4"] {
        let t = store
            .get_by_key(GetByKeyParams {
                kind: "k".into(),
                key: key.into(),
            })
            .await
            .unwrap()
            .expect("the task");
        assert_eq!(
            (t.status, t.attempts),
            (Status::Pending, 0),
            "{key}: pending, no attempt spent"
        );
        let timeline = store.timeline(TimelineParams { id: t.id }).await.unwrap();
        let said: Vec<_> = timeline
            .iter()
            .filter(|e| e.kind == backstop_core::EventType::RateLimited)
            .collect();
        assert_eq!(said.len(), 1, "{key}: one rate_limited event");
        let reason = said[0].reason.as_deref().unwrap_or_default();
        assert!(
            reason.starts_with("rate limit of key \"a\" (10 per 1s, burst 2): may start at "),
            "{reason}"
        );
        due.push(t.run_at);
    }
    // One interval on, plus whatever the claim waited for its lock (a second at most, on the
    // most loaded machine).
    assert!(
        due[0] >= ms(100) && due[0] < ms(1_100),
        "a2 is due one interval on: {due:?}"
    );
    assert_eq!(
        (due[0].duration_until(due[1]), due[1].duration_until(due[2])),
        (
            SignedDuration::from_millis(100),
            SignedDuration::from_millis(100)
        ),
        "the moved tasks are one interval apart, in the order met"
    );
    assert!(
        claim_under(&*store, "w1", 10, ms(50), rate_per_tenant(10, 2))
            .await
            .is_empty(),
        "nothing is due before its time"
    );
    let next = claim_under(&*store, "w1", 10, due[0], rate_per_tenant(10, 2)).await;
    assert_eq!(keys(&next), ["a2"], "one interval on, one more start");
    let later = claim_under(&*store, "w1", 10, due[2], rate_per_tenant(10, 2)).await;
    assert_eq!(
        keys(&later),
        ["a3", "a4"],
        "both due; 200 ms on, the rate allows two"
    );
}

pub async fn a_quiet_key_gets_its_whole_burst_again(store: S) {
    let tasks = (0..6).map(|i| of(&format!("a{i}"), Some("a"))).collect();
    enqueue_all(&*store, tasks).await;
    let first = claim_under(&*store, "w1", 10, at(1), rate_per_tenant(1, 2)).await;
    assert_eq!(first.len(), 2);
    // Long after every moved task's time: the key's state has lapsed (and is forgotten), so a
    // claim starts a burst again.
    let again = claim_under(&*store, "w1", 10, at(100), rate_per_tenant(1, 2)).await;
    assert_eq!(again.len(), 2, "{:?}", keys(&again));
}

pub async fn concurrent_rate_limited_claims_share_one_rate(store: S) {
    let tasks = (0..40)
        .map(|i| of(&format!("t{i}"), Some(&format!("k{}", i % 4))))
        .collect();
    enqueue_all(&*store, tasks).await;
    let claimers: Vec<_> = (0..4)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for _ in 0..5 {
                    mine.extend(
                        claim_under(&*store, &format!("w{w}"), 3, at(1), rate_per_tenant(1, 3))
                            .await,
                    );
                }
                mine
            })
        })
        .collect();
    let mut per: HashMap<String, usize> = HashMap::new();
    for c in claimers {
        for t in c.await.unwrap() {
            *per.entry(rate_key_of(&t)).or_default() += 1;
        }
    }
    assert_eq!(per.len(), 4, "{per:?}");
    assert!(
        per.values().all(|n| *n == 3),
        "the burst of three per key across every claimer, never more: {per:?}"
    );
}

pub async fn a_full_key_spends_none_of_its_rate(store: S) {
    enqueue_all(
        &*store,
        (0..3).map(|i| of(&format!("a{i}"), Some("a"))).collect(),
    )
    .await;
    // One start per 1,000 s, two at once: a start spent on a passed-over task would leave
    // none for the second claim, a second later.
    let both = PerKey {
        concurrency: per_tenant(1).concurrency,
        rate: Some(KeyRate {
            pointer: "/tenant".into(),
            spec: RateSpec {
                limit: 1,
                period: std::time::Duration::from_secs(1_000),
                burst: 2,
            },
        }),
        host: None,
    };
    let first = claim_under(&*store, "w1", 10, at(1), both.clone()).await;
    assert_eq!(keys(&first), ["a0"], "one slot");
    let t = store
        .get_by_key(GetByKeyParams {
            kind: "k".into(),
            key: "a1".into(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        t.run_at,
        t0(),
        "passed over for its slot, not moved for its rate"
    );
    complete(
        &*store,
        vec![completion(
            &first[0],
            Status::Succeeded,
            AttemptOutcome::Succeeded,
            at(1),
        )],
        at(1),
    )
    .await;
    let second = claim_under(&*store, "w1", 10, at(2), both).await;
    assert_eq!(keys(&second), ["a1"], "the burst's second start");
}

fn rate_key_of(c: &ClaimedTask) -> String {
    rate_per_tenant(1, 1)
        .keys_of(&c.payload)
        .1
        .expect("a rate key")
}

fn an_override(
    key: &str,
    max: Option<u32>,
    rate: Option<RateSpec>,
    since: Timestamp,
) -> LimitOverride {
    LimitOverride {
        kind: "k".into(),
        key: key.into(),
        max,
        rate,
        by: "ops@example".into(),
        reason: format!("contract for {key}"),
        since,
    }
}

pub async fn limit_overrides_round_trip_with_their_history(store: S) {
    let rate = RateSpec {
        limit: 5,
        period: std::time::Duration::from_secs(60),
        burst: 2,
    };
    for o in [
        an_override("b", Some(9), None, at(1)),
        an_override("a", Some(3), Some(rate), at(2)),
        an_override("a", None, Some(rate), at(3)),
    ] {
        store
            .set_limit_override(SetLimitOverrideParams { entry: o })
            .await
            .unwrap();
    }
    let all = store
        .limit_overrides(LimitOverridesParams { kind: "k".into() })
        .await
        .unwrap();
    assert_eq!(
        all,
        [
            an_override("a", None, Some(rate), at(3)),
            an_override("b", Some(9), None, at(1))
        ],
        "one row per key, the last set, in key order"
    );
    assert!(
        store
            .limit_overrides(LimitOverridesParams {
                kind: "other".into()
            })
            .await
            .unwrap()
            .is_empty()
    );
    let gone = store
        .clear_limit_override(ClearLimitOverrideParams {
            kind: "k".into(),
            key: "a".into(),
            by: "ops2".into(),
            reason: "contract ended".into(),
            now: at(4),
        })
        .await
        .unwrap();
    assert_eq!(gone, Some(an_override("a", None, Some(rate), at(3))));
    let again = store
        .clear_limit_override(ClearLimitOverrideParams {
            kind: "k".into(),
            key: "a".into(),
            by: "ops2".into(),
            reason: "twice".into(),
            now: at(5),
        })
        .await
        .unwrap();
    assert_eq!(again, None, "nothing to clear, nothing recorded");
    let history = store
        .limit_override_history(LimitOverrideHistoryParams {
            kind: "k".into(),
            key: "a".into(),
            limit: 10,
        })
        .await
        .unwrap();
    let seen: Vec<(OverrideAction, Option<u32>, String, String, Timestamp)> = history
        .into_iter()
        .map(|c| {
            (
                c.action,
                c.entry.max,
                c.entry.by,
                c.entry.reason,
                c.entry.since,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                OverrideAction::Clear,
                None,
                "ops2".to_string(),
                "contract ended".to_string(),
                at(4)
            ),
            (
                OverrideAction::Set,
                None,
                "ops@example".to_string(),
                "contract for a".to_string(),
                at(3)
            ),
            (
                OverrideAction::Set,
                Some(3),
                "ops@example".to_string(),
                "contract for a".to_string(),
                at(2)
            ),
        ],
        "newest first, who and why each time"
    );
}

pub async fn a_claim_follows_a_keys_override(store: S) {
    let tasks = (0..8)
        .map(|i| of(&format!("t{i}"), Some(["a", "b"][i % 2])))
        .collect();
    enqueue_all(&*store, tasks).await;
    store
        .set_limit_override(SetLimitOverrideParams {
            entry: an_override("a", Some(3), None, at(0)),
        })
        .await
        .unwrap();
    let c = claim_limited(&*store, "w1", 10, at(1), 1).await;
    let mut per: HashMap<String, usize> = HashMap::new();
    for t in &c {
        *per.entry(tenant_of(t)).or_default() += 1;
    }
    assert_eq!(
        (per.get("a"), per.get("b")),
        (Some(&3), Some(&1)),
        "a may run 3, b the kind's 1: {per:?}"
    );
    // A rate override for b: one start per 1,000 s rather than the kind's 10 a second.
    store
        .set_limit_override(SetLimitOverrideParams {
            entry: an_override(
                "b",
                None,
                Some(RateSpec {
                    limit: 1,
                    period: std::time::Duration::from_secs(1_000),
                    burst: 1,
                }),
                at(0),
            ),
        })
        .await
        .unwrap();
    let both = PerKey {
        concurrency: per_tenant(10).concurrency,
        rate: rate_per_tenant(10, 1).rate,
        host: None,
    };
    let c = claim_under(&*store, "w2", 10, at(2), both.clone()).await;
    let b_started = c.iter().filter(|t| tenant_of(t) == "b").count();
    assert_eq!(b_started, 1, "{:?}", keys(&c));
    let c = claim_under(&*store, "w2", 10, at(10), both).await;
    assert!(
        c.iter().all(|t| tenant_of(t) != "b"),
        "b's next start is 1,000 s on: {:?}",
        keys(&c)
    );
}

/// A small deterministic generator (xorshift64*), so each seed replays the same interleaving.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// One attempt as the claims handed it out: its key, when it started, when it stopped holding
/// its slot (its end, or its lease's end for a worker that died).
struct Held {
    task: ClaimedTask,
    key: String,
    from: Timestamp,
    until: Timestamp,
    ended: bool,
}

pub async fn random_interleavings_never_run_more_than_max_of_a_key(store: S) {
    // Three keys, max 2 each but 3 for k0 (an override); leases of 5 s. Random claims by
    // three workers, completions, workers that die (their leases lapse), rescues and time
    // passing, over several seeds: at every claim, the attempts holding a slot of a key —
    // from what the claims handed out — never exceed the key's max.
    store
        .set_limit_override(SetLimitOverrideParams {
            entry: an_override("k0", Some(3), None, at(0)),
        })
        .await
        .unwrap();
    let max = |k: &str| if k == "k0" { 3 } else { 2 };
    let lease = SignedDuration::from_secs(5);
    for seed in 1..=4u64 {
        let mut dice = Dice(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let tasks = (0..45)
            .map(|i| {
                let mut t = of(&format!("s{seed}-{i}"), Some(&format!("k{}", dice.roll(3))));
                t.run_at = at(0);
                t
            })
            .collect();
        enqueue_all(&*store, tasks).await;
        let base = SignedDuration::from_secs(1_000 * seed as i64);
        let mut now = at(0) + base;
        let mut held: Vec<Held> = Vec::new();
        for _ in 0..150 {
            now += SignedDuration::from_millis(dice.roll(2_500) as i64);
            match dice.roll(10) {
                0..=4 => {
                    let w = format!("w{}", dice.roll(3));
                    let n = 1 + dice.roll(4) as usize;
                    let got = store
                        .claim(ClaimParams {
                            kind: "k".into(),
                            limit: n,
                            start: n,
                            owner: w,
                            now,
                            lease_until: now + lease,
                            max_attempts: 100,
                            on_group_failure: Default::default(),
                            per_key: Some(per_tenant(2)),
                        })
                        .await
                        .unwrap();
                    for t in got {
                        let key = tenant_of(&t);
                        held.push(Held {
                            task: t,
                            key,
                            from: now,
                            until: now + lease,
                            ended: false,
                        });
                    }
                    let mut per: HashMap<&str, usize> = HashMap::new();
                    for h in held.iter().filter(|h| h.from <= now && now < h.until) {
                        *per.entry(h.key.as_str()).or_default() += 1;
                    }
                    for (k, n) in per {
                        assert!(
                            n <= max(k),
                            "seed {seed}: {n} attempts of {k} hold a slot at once (max {})",
                            max(k)
                        );
                    }
                }
                5..=7 => {
                    // A live worker ends one of its attempts.
                    let live: Vec<usize> = (0..held.len())
                        .filter(|i| !held[*i].ended && held[*i].until > now)
                        .collect();
                    if live.is_empty() {
                        continue;
                    }
                    let i = live[dice.roll(live.len() as u64) as usize];
                    let r = complete(
                        &*store,
                        vec![completion(
                            &held[i].task,
                            Status::Succeeded,
                            AttemptOutcome::Succeeded,
                            now,
                        )],
                        now,
                    )
                    .await;
                    assert!(
                        r.stale.is_empty(),
                        "seed {seed}: a live lease's end was refused"
                    );
                    held[i].ended = true;
                    held[i].until = now;
                }
                8 => {
                    // The reconciler rescues what died (their slots were free already).
                    store
                        .rescue(RescueParams { now, limit: 100 })
                        .await
                        .unwrap();
                }
                _ => {} // Time passes; some holders die with their leases.
            }
        }
        assert!(
            held.iter().filter(|h| h.ended).count() > 10,
            "seed {seed}: the interleaving ran attempts to their end"
        );
    }
}

/// The claim a completion carries for the slots it frees: up to `n` of `k`, at most `max`
/// running per tenant.
fn riding_claim(owner: &str, n: usize, now: Timestamp, max: u32) -> ClaimParams {
    limited_claim(owner, n, now, per_tenant(max))
}

pub async fn a_claim_in_a_completion_takes_the_slot_it_frees(store: S) {
    let mut tasks = Vec::new();
    for (i, tenant) in ["a", "a", "b", "b"].iter().enumerate() {
        let mut t = of(&format!("t{i}"), Some(tenant));
        t.run_at = at(i as i64);
        tasks.push(t);
    }
    enqueue_all(&*store, tasks).await;
    let first = claim_limited(&*store, "w1", 10, at(5), 1).await;
    assert_eq!(keys(&first), ["t0", "t2"]);
    // A stale completion frees nothing: its claim finds every key full.
    let mut stale = completion(
        &first[0],
        Status::Succeeded,
        AttemptOutcome::Succeeded,
        at(6),
    );
    stale.lease.epoch += 7;
    let r = store
        .complete(CompleteParams {
            completions: vec![stale],
            starts: None,
            claims: vec![riding_claim("w1", 5, at(6), 1)],
            now: at(6),
        })
        .await
        .unwrap();
    assert_eq!(r.stale.len(), 1);
    assert_eq!(r.claimed.len(), 1);
    assert!(r.claimed[0].is_empty(), "{:?}", keys(&r.claimed[0]));
    // t0 ends: in the same transaction, its claim takes a's free slot, and only that.
    let r = store
        .complete(CompleteParams {
            completions: vec![completion(
                &first[0],
                Status::Succeeded,
                AttemptOutcome::Succeeded,
                at(7),
            )],
            starts: None,
            claims: vec![riding_claim("w1", 5, at(7), 1)],
            now: at(7),
        })
        .await
        .unwrap();
    assert!(r.stale.is_empty());
    assert_eq!(keys(&r.claimed[0]), ["t1"]);
    assert!(r.claimed[0][0].started && r.claimed[0][0].attempt == 1);
    let counts = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(
        (counts.running, counts.succeeded, counts.pending),
        (2, 1, 1)
    );
    assert!(
        claim_limited(&*store, "w2", 10, at(8), 1).await.is_empty(),
        "both keys full again: t1 is counted"
    );
}
