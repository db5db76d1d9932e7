//! The opaque token a pull worker holds for one leased attempt. It carries the fence (task id
//! and epoch) and what the completion must record, so neither heartbeat nor completion needs
//! server-side session state. It is a fence, not a credential: the API's bearer token is what
//! authenticates a worker, and a forged token can only name an epoch that the store checks.

use backstop_core::TaskId;
use backstop_core::store::LeaseRef;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jiff::Timestamp;
use std::time::Duration;

const VERSION: u8 = 1;
/// Fixed part: version, id, epoch, attempt, started (ms), lease (ms).
const FIXED: usize = 1 + 16 + 8 + 4 + 8 + 4;

/// What a lease token says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseToken {
    pub lease: LeaseRef,
    /// The attempt this lease started (1-based).
    pub attempt: u32,
    /// When the attempt started (the claim).
    pub started_at: Timestamp,
    /// How long each heartbeat extends the lease.
    pub lease_for: Duration,
    /// The lease owner recorded in the ledger (`pull:` and the worker's name).
    pub owner: String,
}

/// A token that is not one of ours.
#[derive(Debug, thiserror::Error)]
#[error("not a lease token (it must be the `token` string a lease response returned)")]
pub struct BadToken;

impl LeaseToken {
    /// The URL-safe text form.
    pub fn encode(&self) -> String {
        let mut b = Vec::with_capacity(FIXED + self.owner.len());
        b.push(VERSION);
        b.extend_from_slice(self.lease.id.0.as_bytes());
        b.extend_from_slice(&self.lease.epoch.to_be_bytes());
        b.extend_from_slice(&self.attempt.to_be_bytes());
        b.extend_from_slice(&self.started_at.as_millisecond().to_be_bytes());
        let ms = u32::try_from(self.lease_for.as_millis()).unwrap_or(u32::MAX);
        b.extend_from_slice(&ms.to_be_bytes());
        b.extend_from_slice(self.owner.as_bytes());
        URL_SAFE_NO_PAD.encode(b)
    }

    /// Reads the text form.
    pub fn decode(s: &str) -> Result<LeaseToken, BadToken> {
        if s.len() > 1024 {
            return Err(BadToken);
        }
        let b = URL_SAFE_NO_PAD.decode(s).map_err(|_| BadToken)?;
        if b.len() < FIXED || b[0] != VERSION {
            return Err(BadToken);
        }
        let id = uuid::Uuid::from_slice(&b[1..17]).map_err(|_| BadToken)?;
        let epoch = i64::from_be_bytes(b[17..25].try_into().expect("8 bytes"));
        let attempt = u32::from_be_bytes(b[25..29].try_into().expect("4 bytes"));
        let started = i64::from_be_bytes(b[29..37].try_into().expect("8 bytes"));
        let lease_ms = u32::from_be_bytes(b[37..41].try_into().expect("4 bytes"));
        let owner = String::from_utf8(b[FIXED..].to_vec()).map_err(|_| BadToken)?;
        let started_at = Timestamp::from_millisecond(started).map_err(|_| BadToken)?;
        if owner.is_empty() || attempt == 0 || lease_ms == 0 {
            return Err(BadToken);
        }
        Ok(LeaseToken {
            lease: LeaseRef {
                id: TaskId(id),
                epoch,
            },
            attempt,
            started_at,
            lease_for: Duration::from_millis(u64::from(lease_ms)),
            owner,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_reads_back_as_written() {
        let t = LeaseToken {
            lease: LeaseRef {
                id: TaskId::new(),
                epoch: 7,
            },
            attempt: 3,
            started_at: Timestamp::from_millisecond(1_790_000_000_123).unwrap(),
            lease_for: Duration::from_secs(30),
            owner: "pull:worker-1".into(),
        };
        let text = t.encode();
        assert!(
            text.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert_eq!(LeaseToken::decode(&text).unwrap(), t);
    }

    #[test]
    fn garbage_is_rejected() {
        for s in [
            "",
            "abc",
            "!!!!",
            &"A".repeat(2000),
            &URL_SAFE_NO_PAD.encode([9u8; 60]),
        ] {
            assert!(LeaseToken::decode(s).is_err(), "{s}");
        }
    }
}
