//! A limit per target host: at most `max` attempts at once across every push kind whose URL
//! names the host, in every process (`[hosts."warehouse.internal"] concurrency = 8`). A
//! downstream is a host, not a kind: three kinds posting to one warehouse share its capacity.
//!
//! Counted like a per-key limit ([`super`]), from live leases and never from a counter: a claim
//! of one of the host's kinds counts the running tasks of all of them whose lease has not
//! ended, under a lock per host (taken after the kind's own), and takes at most what is left.
//! A task already running when the limit was configured counts too: the count reads kinds, not
//! a key written on the row.

/// Longest claim-lock name (the width of MySQL's `claim_locks.kind`).
pub const LOCK_NAME_BYTES: usize = 128;

/// A host's concurrency limit as a claim of one of its kinds needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostMax {
    /// The host as the config names it (`warehouse.internal`, or `127.0.0.1:8080` with a port).
    pub host: String,
    /// Every kind whose target is on the host, sorted, the claiming kind among them.
    pub kinds: Vec<String>,
    /// Most attempts running at once across them (at least 1).
    pub max: u32,
}

impl HostMax {
    /// How many more may start when `running` of the host's tasks hold live leases.
    pub fn free(&self, running: u64) -> usize {
        let running = usize::try_from(running).unwrap_or(usize::MAX);
        (self.max as usize).saturating_sub(running)
    }

    /// The name of the host's claim lock (a row on MySQL/MariaDB, an advisory lock's text on
    /// PostgreSQL), at most [`LOCK_NAME_BYTES`] long: a longer host is named by a hash of it
    /// (two hosts sharing one would only take turns). A kind's own lock is its name, which
    /// never starts with `host `.
    pub fn lock_name(&self) -> String {
        let name = format!("host {}", self.host);
        if name.len() <= LOCK_NAME_BYTES {
            return name;
        }
        // FNV-1a: stable across processes and releases, unlike std's hasher.
        let hash = self.host.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("host #{hash:016x}")
    }
}

/// The host a push target's URL names, as `[hosts]` keys it: the host in lower case, with
/// `:port` when the URL gives a port that is not its scheme's default. `None` for a URL
/// without a host.
pub fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://").map(|(_, r)| r)?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    if authority.is_empty() {
        return None;
    }
    let scheme = url.split_once("://")?.0.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => "443",
        _ => "80",
    };
    // A bracketed IPv6 address keeps its colons.
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], Some(&authority[i + 1..])),
        _ => (authority, None),
    };
    let host = host.to_ascii_lowercase();
    Some(match port {
        Some(p) if !p.is_empty() && p != default_port => format!("{host}:{p}"),
        _ => host,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_named_without_its_default_port() {
        assert_eq!(
            host_of("https://Pay.Internal/refund").as_deref(),
            Some("pay.internal")
        );
        assert_eq!(
            host_of("https://pay.internal:443/x").as_deref(),
            Some("pay.internal")
        );
        assert_eq!(
            host_of("http://127.0.0.1:8080/hooks?a=1").as_deref(),
            Some("127.0.0.1:8080")
        );
        assert_eq!(
            host_of("http://user:pw@wh.example:81").as_deref(),
            Some("wh.example:81")
        );
        assert_eq!(host_of("http://[::1]:9000/").as_deref(), Some("[::1]:9000"));
        assert_eq!(host_of("http://[::1]/").as_deref(), Some("[::1]"));
        assert_eq!(host_of("no scheme"), None);
    }

    #[test]
    fn what_is_free_never_goes_below_none() {
        let h = HostMax {
            host: "h".into(),
            kinds: vec!["a".into()],
            max: 3,
        };
        assert_eq!(h.free(0), 3);
        assert_eq!(h.free(2), 1);
        assert_eq!(h.free(7), 0);
        assert_eq!(h.lock_name(), "host h");
        let long = HostMax {
            host: "a".repeat(200),
            ..h
        };
        assert!(long.lock_name().starts_with("host #"));
        assert!(long.lock_name().len() <= LOCK_NAME_BYTES);
    }
}
