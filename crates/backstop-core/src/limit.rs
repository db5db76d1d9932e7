//! Concurrency limits per key: at most `max` attempts of one kind run at once for each value of
//! a key read from their payloads (`limits.concurrency = { key = "/tenant_id", max = 5 }`).
//!
//! How the ledger keeps it (every store the same way, see docs/limits.md):
//!
//! - **Counted from live leases.** A claim of a limited kind counts, per key, the kind's
//!   running tasks whose lease has not ended; nothing is incremented or decremented, so a
//!   worker killed mid-attempt cannot leak a slot: its slot frees when its lease ends. Each
//!   started task's key is written on its row (`lkey`) by the claim that admits it.
//! - **One admission at a time.** The claims of one limited kind are serialised (an advisory
//!   lock on PostgreSQL, a row lock on MySQL/MariaDB, the single writer on SQLite), so two
//!   claimers cannot both take a key's last slot.
//! - **Started, never held.** A limited claim starts every task it takes: a task leased ahead
//!   would start later without its key being counted again.
//! - **Fair across keys.** The claim reads due tasks oldest first in windows and skips the tasks
//!   of a key that is full, reading on (up to [`SCAN_BUDGET`] rows), so a key with a thousand
//!   queued tasks does not starve keys with ten.

use std::collections::HashMap;

/// Longest key accepted, in bytes (UTF-8).
pub const MAX_KEY_BYTES: usize = 512;

/// The key a task without one counts under when its kind says `missing_key = "shared"` (and
/// what any task lacking its key counts under at a claim: an outbox row, say).
pub const SHARED_KEY: &str = "";

/// Most due rows one limited claim reads looking for tasks whose keys have a free slot.
pub const SCAN_BUDGET: usize = 10_000;

/// What an enqueue does with a payload that lacks the limit's key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissingKey {
    /// Refused: the request is a 422 naming the pointer (a bridge's message becomes a dead
    /// letter saying why).
    #[default]
    Reject,
    /// Accepted: every such task shares one key.
    Shared,
}

impl MissingKey {
    /// The name used in config.
    pub fn as_str(self) -> &'static str {
        match self {
            MissingKey::Reject => "reject",
            MissingKey::Shared => "shared",
        }
    }
}

impl std::str::FromStr for MissingKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "reject" => Ok(MissingKey::Reject),
            "shared" => Ok(MissingKey::Shared),
            other => Err(format!(
                "missing_key {other:?} is not one of \"reject\" or \"shared\""
            )),
        }
    }
}

/// A kind's concurrency limit per key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConcurrencyLimit {
    /// A JSON pointer into the payload naming the key (`/tenant_id`).
    pub key: String,
    /// Most attempts running at once per key (at least 1).
    pub max: u32,
    /// What an enqueue does with a payload lacking the key.
    pub missing_key: MissingKey,
}

impl ConcurrencyLimit {
    /// What a claim needs of it.
    pub fn per_key(&self) -> PerKey {
        PerKey {
            pointer: self.key.clone(),
            max: self.max,
        }
    }

    /// Checks a payload at enqueue: its key, or why it cannot be used.
    pub fn check(&self, payload: &serde_json::Value) -> Result<String, BadKey> {
        match crate::pointer::key_at(payload, &self.key) {
            Ok(k) if k.len() > MAX_KEY_BYTES => Err(BadKey::TooLong {
                pointer: self.key.clone(),
                len: k.len(),
            }),
            Ok(k) => Ok(k),
            Err(e) if e.found == "missing" && self.missing_key == MissingKey::Shared => {
                Ok(SHARED_KEY.to_string())
            }
            Err(e) => Err(BadKey::NotAKey {
                pointer: e.pointer,
                found: e.found,
            }),
        }
    }
}

/// A limit key that cannot be used.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadKey {
    /// The payload's value at the pointer is missing (under `missing_key = "reject"`) or is
    /// not a string or an integer.
    #[error(
        "the payload's {pointer} is {found}, not a string or an integer (the kind's limits.concurrency key)"
    )]
    NotAKey {
        /// The limit's pointer.
        pointer: String,
        /// What was found there.
        found: &'static str,
    },
    /// Longer than [`MAX_KEY_BYTES`].
    #[error("the payload's {pointer} is {len} bytes long; a limit key is at most {MAX_KEY_BYTES}")]
    TooLong {
        /// The limit's pointer.
        pointer: String,
        /// Its length in bytes.
        len: usize,
    },
}

/// What a claim of a limited kind is told: where the key is and how many may run per key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerKey {
    /// The JSON pointer into the payload.
    pub pointer: String,
    /// Most running per key.
    pub max: u32,
}

impl PerKey {
    /// The key a payload counts under: the value at the pointer, or [`SHARED_KEY`] when it
    /// has none (a claim never leaves a task waiting forever for want of a key).
    pub fn key_of(&self, payload: &[u8]) -> String {
        serde_json::from_slice::<serde_json::Value>(payload)
            .ok()
            .and_then(|v| crate::pointer::key_at(&v, &self.pointer).ok())
            .filter(|k| k.len() <= MAX_KEY_BYTES)
            .unwrap_or_else(|| SHARED_KEY.to_string())
    }
}

/// One claim's admissions: the running count per key it started from, and each task it admits
/// on top.
#[derive(Debug)]
pub struct Admission<'a> {
    limit: &'a PerKey,
    running: HashMap<String, u32>,
}

impl<'a> Admission<'a> {
    /// Starts from the running tasks' keys: each key with how many of the kind's tasks run
    /// under it with a live lease.
    pub fn new(limit: &'a PerKey, running: impl IntoIterator<Item = (String, u32)>) -> Self {
        let mut counts: HashMap<String, u32> = HashMap::new();
        for (k, n) in running {
            *counts.entry(k).or_default() += n;
        }
        Admission {
            limit,
            running: counts,
        }
    }

    /// The size of the next window of due rows to read, after `read` rows so far, for a claim
    /// of `want`: exactly `want` first (when no key is full, one read is all it takes), then
    /// four times more each time, within [`SCAN_BUDGET`].
    pub fn window(want: usize, read: usize) -> usize {
        let w = if read == 0 { want } else { read * 4 };
        w.clamp(1, SCAN_BUDGET.saturating_sub(read).max(1))
    }

    /// Admits a task with this payload if its key has a free slot: its key, counted from now
    /// on; `None` when the key is full.
    pub fn admit(&mut self, payload: &[u8]) -> Option<String> {
        let key = self.limit.key_of(payload);
        let n = self.running.entry(key.clone()).or_default();
        if *n >= self.limit.max {
            return None;
        }
        *n += 1;
        Some(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limit(max: u32, missing_key: MissingKey) -> ConcurrencyLimit {
        ConcurrencyLimit {
            key: "/tenant".into(),
            max,
            missing_key,
        }
    }

    #[test]
    fn a_key_is_admitted_up_to_its_max_counting_what_runs() {
        let l = limit(2, MissingKey::Reject).per_key();
        let mut a = Admission::new(&l, [("t1".to_string(), 1)]);
        let t1 = br#"{"tenant":"t1"}"#;
        let t2 = br#"{"tenant":"t2"}"#;
        assert_eq!(a.admit(t1).as_deref(), Some("t1"));
        assert_eq!(a.admit(t1), None, "t1 already had one running");
        assert_eq!(a.admit(t2).as_deref(), Some("t2"));
        assert_eq!(a.admit(t2).as_deref(), Some("t2"));
        assert_eq!(a.admit(t2), None);
    }

    #[test]
    fn a_payload_without_its_key_counts_under_the_shared_key_at_a_claim() {
        let l = limit(1, MissingKey::Reject).per_key();
        let mut a = Admission::new(&l, []);
        assert_eq!(a.admit(b"{}").as_deref(), Some(SHARED_KEY));
        assert_eq!(a.admit(br#"{"tenant":{}}"#), None);
        assert_eq!(a.admit(b"not json"), None);
        assert_eq!(
            a.admit(br#"{"tenant":1001}"#).as_deref(),
            Some("1001"),
            "an integer key in decimal"
        );
    }

    #[test]
    fn an_enqueue_checks_the_key_as_the_kind_says() {
        let reject = limit(1, MissingKey::Reject);
        let shared = limit(1, MissingKey::Shared);
        assert_eq!(reject.check(&json!({"tenant": "a"})).unwrap(), "a");
        let e = reject.check(&json!({})).unwrap_err();
        assert!(e.to_string().contains("/tenant is missing"), "{e}");
        assert_eq!(shared.check(&json!({})).unwrap(), SHARED_KEY);
        assert!(
            shared.check(&json!({"tenant": [1]})).is_err(),
            "shared is for a missing key, not a wrong one"
        );
        let long = json!({"tenant": "x".repeat(513)});
        assert_eq!(
            reject.check(&long),
            Err(BadKey::TooLong {
                pointer: "/tenant".into(),
                len: 513
            })
        );
    }

    #[test]
    fn windows_start_at_what_is_wanted_and_grow_within_the_budget() {
        assert_eq!(Admission::window(10, 0), 10);
        assert_eq!(Admission::window(10, 10), 40);
        assert_eq!(Admission::window(10, 50), 200);
        assert_eq!(Admission::window(1000, 9000), 1000);
    }

    #[test]
    fn missing_key_reads_its_two_names() {
        assert_eq!("reject".parse::<MissingKey>(), Ok(MissingKey::Reject));
        assert_eq!("shared".parse::<MissingKey>(), Ok(MissingKey::Shared));
        assert!("drop".parse::<MissingKey>().unwrap_err().contains("reject"));
    }
}
