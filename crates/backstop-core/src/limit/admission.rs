//! One limited claim's admissions: what the claim is told of the kind's limits per key
//! ([`PerKey`]), the overrides and rate times the store read, and the verdict on each due task
//! it meets, oldest first.

use super::rate::RateSpec;
use super::{SCAN_BUDGET, key_of};
use std::collections::HashMap;

/// Most due tasks one claim moves on for a key's rate: the rest of a long backlog of one key is
/// passed over and moved by the following claims, so no claim's transaction grows with it.
pub const THROTTLE_BUDGET: usize = 1_000;

/// The time a limited claim's rate decisions are made at, in µs: the claim's `now` plus how
/// long it waited for the kind's lock, in whole milliseconds. The tasks it starts leave after
/// that wait, and a `now` from before it would let a claim that waited start tasks its rate
/// counts as earlier than they go (measured: 13 in one second at 10/s, burst 2, across three
/// processes on MariaDB). Less than a millisecond counts as none, so an unhurried claim
/// decides at exactly its `now`.
pub fn rate_clock(now: jiff::Timestamp, waited: std::time::Duration) -> i64 {
    let waited_ms = i64::try_from(waited.as_millis()).unwrap_or(i64::MAX / 2_000);
    now.as_microsecond().saturating_add(waited_ms * 1_000)
}

/// A concurrency limit as a claim needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyMax {
    /// The JSON pointer into the payload.
    pub pointer: String,
    /// Most running per key.
    pub max: u32,
}

/// A rate limit as a claim needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRate {
    /// The JSON pointer into the payload.
    pub pointer: String,
    /// The rate per key.
    pub spec: RateSpec,
}

/// What a claim of a limited kind is told: its limits per key (one or both).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerKey {
    /// At most so many running per key.
    pub concurrency: Option<KeyMax>,
    /// At most so many starts per period per key.
    pub rate: Option<KeyRate>,
    /// At most so many running across every kind on the kind's target host.
    pub host: Option<super::HostMax>,
}

impl PerKey {
    /// The keys a payload counts under, for the concurrency limit and for the rate limit.
    pub fn keys_of(&self, payload: &[u8]) -> (Option<String>, Option<String>) {
        if self.concurrency.is_none() && self.rate.is_none() {
            return (None, None);
        }
        let v = serde_json::from_slice::<serde_json::Value>(payload).ok();
        (
            self.concurrency
                .as_ref()
                .map(|c| key_of(v.as_ref(), &c.pointer)),
            self.rate.as_ref().map(|r| key_of(v.as_ref(), &r.pointer)),
        )
    }
}

/// A key's limits set at run time, in place of the kind's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyOverride {
    /// Most running at once for this key.
    pub max: Option<u32>,
    /// The rate for this key.
    pub rate: Option<RateSpec>,
}

impl KeyOverride {
    /// From a store's row: `max`, and the rate as `limit`, `period` in milliseconds and
    /// `burst` (all three, or no rate override).
    pub fn from_row(
        max: Option<i64>,
        limit: Option<i64>,
        period_ms: Option<i64>,
        burst: Option<i64>,
    ) -> Self {
        let n = |v: i64, least: i64| v.clamp(least, i64::from(u32::MAX)) as u32;
        let rate = match (limit, period_ms, burst) {
            (Some(l), Some(p), Some(b)) => Some(RateSpec {
                limit: n(l, 1),
                period: std::time::Duration::from_millis(p.max(1) as u64),
                burst: n(b, 1),
            }),
            _ => None,
        };
        KeyOverride {
            max: max.map(|m| n(m, 0)),
            rate,
        }
    }
}

/// A key's stored rate state, in microseconds since the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateState {
    /// The theoretical arrival time: where the next conforming start stands.
    pub tat_us: i64,
    /// The latest time a claim moved one of the key's tasks to, so the next moved task goes
    /// after it rather than to the same instant.
    pub planned_us: i64,
}

/// What a claim does with one due task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Start it; write this concurrency key on its row (`None`: the kind has no concurrency
    /// limit).
    Start {
        /// The key its concurrency slot is counted under.
        lkey: Option<String>,
    },
    /// Leave it as it is: its key's slots are full (or this claim has moved enough tasks on).
    Pass,
    /// Its key's rate forbids a start now: move it to `until_us` and say so on its timeline.
    Throttled {
        /// The rate key.
        key: String,
        /// When it may start.
        until_us: i64,
        /// The rate that held it: the kind's, or the key's override.
        rate: RateSpec,
    },
}

impl Verdict {
    /// What a throttled task's `rate_limited` event says: the key, the rate, and when it may
    /// start (`None` for the other verdicts).
    pub fn reason(&self) -> Option<String> {
        let Verdict::Throttled {
            key,
            until_us,
            rate,
        } = self
        else {
            return None;
        };
        let key = match key.as_str() {
            super::SHARED_KEY => "the shared key".to_string(),
            k => format!("key {k:?}"),
        };
        let until = jiff::Timestamp::from_microsecond(*until_us)
            .map(|t| t.round(jiff::Unit::Millisecond).unwrap_or(t).to_string())
            .unwrap_or_else(|_| until_us.to_string());
        Some(format!(
            "rate limit of {key} ({}): may start at {until}",
            rate.describe()
        ))
    }
}

/// One claim's admissions: the running count per key it started from, the keys' rate state,
/// and each task it admits or moves on top.
#[derive(Debug)]
pub struct Admission<'a> {
    limit: &'a PerKey,
    now_us: i64,
    running: HashMap<String, u32>,
    overrides: HashMap<String, KeyOverride>,
    rates: HashMap<String, (RateState, bool)>,
    throttled: usize,
}

impl<'a> Admission<'a> {
    /// Starts from the running tasks' keys: each key with how many of the kind's tasks run
    /// under it with a live lease.
    pub fn new(
        limit: &'a PerKey,
        now_us: i64,
        running: impl IntoIterator<Item = (String, u32)>,
    ) -> Self {
        let mut counts: HashMap<String, u32> = HashMap::new();
        for (k, n) in running {
            *counts.entry(k).or_default() += n;
        }
        Admission {
            limit,
            now_us,
            running: counts,
            overrides: HashMap::new(),
            rates: HashMap::new(),
            throttled: 0,
        }
    }

    /// With the keys' overrides.
    pub fn overrides(mut self, o: impl IntoIterator<Item = (String, KeyOverride)>) -> Self {
        self.overrides.extend(o);
        self
    }

    /// With the keys' stored rate state (a key not given has never started, or not lately).
    pub fn rates(mut self, r: impl IntoIterator<Item = (String, RateState)>) -> Self {
        self.rates
            .extend(r.into_iter().map(|(k, s)| (k, (s, false))));
        self
    }

    /// The size of the next window of due rows to read, after `read` rows so far, for a claim
    /// of `want`: exactly `want` first (when no key is full, one read is all it takes), then
    /// four times more each time, within [`SCAN_BUDGET`].
    pub fn window(want: usize, read: usize) -> usize {
        let w = if read == 0 { want } else { read * 4 };
        w.clamp(1, SCAN_BUDGET.saturating_sub(read).max(1))
    }

    /// The verdict on a due task with this payload, counted from now on.
    pub fn admit(&mut self, payload: &[u8]) -> Verdict {
        let (ckey, rkey) = self.limit.keys_of(payload);
        if let (Some(c), Some(k)) = (&self.limit.concurrency, &ckey) {
            let max = self.overrides.get(k).and_then(|o| o.max).unwrap_or(c.max);
            if self.running.get(k).copied().unwrap_or(0) >= max {
                return Verdict::Pass;
            }
        }
        if let (Some(r), Some(k)) = (&self.limit.rate, rkey) {
            let spec = self
                .overrides
                .get(&k)
                .and_then(|o| o.rate)
                .unwrap_or(r.spec);
            let gcra = spec.gcra();
            let (state, changed) = self.rates.entry(k.clone()).or_insert((
                RateState {
                    tat_us: i64::MIN,
                    planned_us: i64::MIN,
                },
                false,
            ));
            match gcra.take(state.tat_us, self.now_us) {
                Ok(tat) => {
                    state.tat_us = tat;
                    *changed = true;
                }
                Err(_) if self.throttled >= THROTTLE_BUDGET => return Verdict::Pass,
                Err(allowed) => {
                    let until = allowed.max(state.planned_us.saturating_add(gcra.interval_us));
                    state.planned_us = until;
                    *changed = true;
                    self.throttled += 1;
                    return Verdict::Throttled {
                        key: k,
                        until_us: until,
                        rate: spec,
                    };
                }
            }
        }
        if let Some(k) = &ckey {
            *self.running.entry(k.clone()).or_default() += 1;
        }
        Verdict::Start { lkey: ckey }
    }

    /// The rate states this claim changed, to be stored with its starts.
    pub fn changed_rates(&self) -> impl Iterator<Item = (&str, RateState)> {
        self.rates
            .iter()
            .filter(|(_, (_, changed))| *changed)
            .map(|(k, (s, _))| (k.as_str(), *s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::SHARED_KEY;
    use std::time::Duration;

    fn concurrency(max: u32) -> PerKey {
        PerKey {
            concurrency: Some(KeyMax {
                pointer: "/tenant".into(),
                max,
            }),
            rate: None,
            host: None,
        }
    }

    fn rate(limit: u32, burst: u32) -> PerKey {
        PerKey {
            concurrency: None,
            rate: Some(KeyRate {
                pointer: "/tenant".into(),
                spec: RateSpec {
                    limit,
                    period: Duration::from_secs(1),
                    burst,
                },
            }),
            host: None,
        }
    }

    fn started(v: Verdict) -> Option<String> {
        match v {
            Verdict::Start { lkey } => lkey,
            other => panic!("expected a start, got {other:?}"),
        }
    }

    const T1: &[u8] = br#"{"tenant":"t1"}"#;
    const T2: &[u8] = br#"{"tenant":"t2"}"#;

    #[test]
    fn a_key_is_admitted_up_to_its_max_counting_what_runs() {
        let l = concurrency(2);
        let mut a = Admission::new(&l, 0, [("t1".to_string(), 1)]);
        assert_eq!(started(a.admit(T1)).as_deref(), Some("t1"));
        assert_eq!(a.admit(T1), Verdict::Pass, "t1 already had one running");
        assert_eq!(started(a.admit(T2)).as_deref(), Some("t2"));
        assert_eq!(started(a.admit(T2)).as_deref(), Some("t2"));
        assert_eq!(a.admit(T2), Verdict::Pass);
    }

    #[test]
    fn a_payload_without_its_key_counts_under_the_shared_key_at_a_claim() {
        let l = concurrency(1);
        let mut a = Admission::new(&l, 0, []);
        assert_eq!(started(a.admit(b"{}")).as_deref(), Some(SHARED_KEY));
        assert_eq!(a.admit(br#"{"tenant":{}}"#), Verdict::Pass);
        assert_eq!(a.admit(b"not json"), Verdict::Pass);
        assert_eq!(
            started(a.admit(br#"{"tenant":1001}"#)).as_deref(),
            Some("1001"),
            "an integer key in decimal"
        );
    }

    #[test]
    fn an_override_replaces_the_kinds_max_for_its_key_only() {
        let l = concurrency(1);
        let mut a = Admission::new(&l, 0, []).overrides([(
            "t1".to_string(),
            KeyOverride {
                max: Some(3),
                rate: None,
            },
        )]);
        for _ in 0..3 {
            started(a.admit(T1));
        }
        assert_eq!(a.admit(T1), Verdict::Pass);
        started(a.admit(T2));
        assert_eq!(a.admit(T2), Verdict::Pass);
    }

    #[test]
    fn a_throttled_keys_tasks_are_moved_one_interval_apart_in_the_order_met() {
        let l = rate(10, 1);
        let now = 5_000_000;
        let mut a = Admission::new(&l, now, []);
        assert_eq!(started(a.admit(T1)), None, "no concurrency key to write");
        let mut until = Vec::new();
        for _ in 0..3 {
            match a.admit(T1) {
                v @ Verdict::Throttled { .. } => {
                    let reason = v.reason().unwrap();
                    assert!(
                        reason.starts_with("rate limit of key \"t1\" (10 per 1s, burst 1): may start at 1970-01-01T00:00:05."),
                        "{reason}"
                    );
                    let Verdict::Throttled { until_us, .. } = v else {
                        unreachable!()
                    };
                    until.push(until_us - now);
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(until, [100_000, 200_000, 300_000]);
        started(a.admit(T2));
        let changed: HashMap<&str, RateState> = a.changed_rates().collect();
        assert_eq!(changed["t1"].tat_us, now + 100_000);
        assert_eq!(changed["t1"].planned_us, now + 300_000);
        assert_eq!(changed["t2"].planned_us, i64::MIN);
    }

    #[test]
    fn a_stored_rate_state_is_where_a_claim_goes_on_from() {
        let l = rate(10, 1);
        let now = 5_000_000;
        let mut a = Admission::new(&l, now, []).rates([(
            "t1".to_string(),
            RateState {
                tat_us: now + 50_000,
                planned_us: now + 400_000,
            },
        )]);
        match a.admit(T1) {
            Verdict::Throttled { until_us, .. } => {
                assert_eq!(until_us, now + 500_000, "after the last one moved")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_full_key_spends_no_rate() {
        let l = PerKey {
            concurrency: concurrency(1).concurrency,
            rate: rate(10, 1).rate,
            host: None,
        };
        let mut a = Admission::new(&l, 0, [("t1".to_string(), 1)]);
        assert_eq!(a.admit(T1), Verdict::Pass);
        assert_eq!(a.changed_rates().count(), 0);
        assert_eq!(started(a.admit(T2)).as_deref(), Some("t2"));
    }

    #[test]
    fn one_claim_moves_at_most_its_budget() {
        let l = rate(1, 1);
        let mut a = Admission::new(&l, 0, []);
        started(a.admit(T1));
        for _ in 0..THROTTLE_BUDGET {
            assert!(matches!(a.admit(T1), Verdict::Throttled { .. }));
        }
        assert_eq!(a.admit(T1), Verdict::Pass);
    }

    #[test]
    fn windows_start_at_what_is_wanted_and_grow_within_the_budget() {
        assert_eq!(Admission::window(10, 0), 10);
        assert_eq!(Admission::window(10, 10), 40);
        assert_eq!(Admission::window(10, 50), 200);
        assert_eq!(Admission::window(1000, 9000), 1000);
    }
}
