//! Limits per key: at most `max` attempts of one kind running at once for each value of a key
//! read from their payloads (`limits.concurrency = { key = "/tenant_id", max = 5 }`), and at
//! most `limit` attempt starts per `period` for each value (`limits.rate = { key = "/tenant_id",
//! limit = 100, period = "1s", burst = 10 }`).
//!
//! How the ledger keeps them (every store the same way, see docs/limits.md):
//!
//! - **Concurrency, counted from live leases.** A claim of a limited kind counts, per key, the
//!   kind's running tasks whose lease has not ended; nothing is incremented or decremented, so
//!   a worker killed mid-attempt cannot leak a slot: its slot frees when its lease ends. Each
//!   started task's key is written on its row (`lkey`) by the claim that admits it.
//! - **Rate, by GCRA** ([`rate`]): one stored time per key (its theoretical arrival time),
//!   advanced by each start. A task whose start would come too soon stays pending, its `run_at`
//!   moved to when it may start, with a `rate_limited` event; it spends no attempt.
//! - **One admission at a time.** The claims of one limited kind are serialised (an advisory
//!   lock on PostgreSQL, a row lock on MySQL/MariaDB, the single writer on SQLite), so two
//!   claimers cannot both take a key's last slot or its next start.
//! - **Started, never held.** A limited claim starts every task it takes: a task leased ahead
//!   would start later without its key being counted again. Its slots are refilled by claims
//!   made in the transactions that write its attempts' ends (`CompleteParams::claims`).
//! - **Fair across keys.** The claim reads due tasks oldest first in windows and skips the tasks
//!   of a key that is full, reading on (up to [`SCAN_BUDGET`] rows), so a key with a thousand
//!   queued tasks does not starve keys with ten.
//! - **Per target host** ([`host`]): a push kind's attempts may also be capped across every
//!   kind posting to the same host, counted the same way over all of them.
//! - **Overrides per key** ([`KeyOverride`]), set at run time, replace the kind's `max` or rate
//!   for one key; the claim reads them from the store.

mod admission;
pub mod host;
pub mod rate;

pub use admission::{
    Admission, KeyMax, KeyOverride, KeyRate, PerKey, RateState, THROTTLE_BUDGET, Verdict,
    rate_clock,
};
pub use host::{HostMax, host_of};
pub use rate::{Gcra, RateLimit, RateSpec};

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
    pub fn per_key(&self) -> KeyMax {
        KeyMax {
            pointer: self.key.clone(),
            max: self.max,
        }
    }

    /// Checks a payload at enqueue: its key, or why it cannot be used.
    pub fn check(&self, payload: &serde_json::Value) -> Result<String, BadKey> {
        check_key(payload, &self.key, self.missing_key, "limits.concurrency")
    }
}

/// The key `payload` holds at `pointer` for the limit named `limit`, as an enqueue checks it:
/// a missing key is [`SHARED_KEY`] under `missing_key = "shared"`.
pub(crate) fn check_key(
    payload: &serde_json::Value,
    pointer: &str,
    missing_key: MissingKey,
    limit: &'static str,
) -> Result<String, BadKey> {
    match crate::pointer::key_at(payload, pointer) {
        Ok(k) if k.len() > MAX_KEY_BYTES => Err(BadKey::TooLong {
            pointer: pointer.to_string(),
            len: k.len(),
        }),
        Ok(k) => Ok(k),
        Err(e) if e.found == "missing" && missing_key == MissingKey::Shared => {
            Ok(SHARED_KEY.to_string())
        }
        Err(e) => Err(BadKey::NotAKey {
            pointer: e.pointer,
            found: e.found,
            limit,
        }),
    }
}

/// The key a claim counts a task under: the value at `pointer`, or [`SHARED_KEY`] when it has
/// none (a claim never leaves a task waiting forever for want of a key).
pub fn key_of(payload: Option<&serde_json::Value>, pointer: &str) -> String {
    payload
        .and_then(|v| crate::pointer::key_at(v, pointer).ok())
        .filter(|k| k.len() <= MAX_KEY_BYTES)
        .unwrap_or_else(|| SHARED_KEY.to_string())
}

/// A limit key that cannot be used.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadKey {
    /// The payload's value at the pointer is missing (under `missing_key = "reject"`) or is
    /// not a string or an integer.
    #[error(
        "the payload's {pointer} is {found}, not a string or an integer (the kind's {limit} key)"
    )]
    NotAKey {
        /// The limit's pointer.
        pointer: String,
        /// What was found there.
        found: &'static str,
        /// Which limit: `limits.concurrency` or `limits.rate`.
        limit: &'static str,
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
    fn missing_key_reads_its_two_names() {
        assert_eq!("reject".parse::<MissingKey>(), Ok(MissingKey::Reject));
        assert_eq!("shared".parse::<MissingKey>(), Ok(MissingKey::Shared));
        assert!("drop".parse::<MissingKey>().unwrap_err().contains("reject"));
    }
}
