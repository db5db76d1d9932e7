//! Per-kind configuration: its target, attempt budget, retry policy and limits.

use crate::backoff::RetryPolicy;
use std::time::Duration;

/// Where a kind's tasks are delivered.
#[derive(Clone, PartialEq)]
pub enum Target {
    /// A Rust handler registered on the embedded engine.
    InProcess,
    /// POST the payload to `url`, signed with the Standard Webhooks `secret` when given.
    HttpPush { url: String, secret: Option<String> },
    /// Workers lease the tasks over the HTTP API and report outcomes themselves.
    Pull,
    /// Publish to a broker (RabbitMQ, Redis): success is the broker's confirmation.
    Broker(crate::broker::BrokerTarget),
}

// Written by hand so that a signing secret never reaches a log line.
impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::InProcess => f.write_str("InProcess"),
            Target::Pull => f.write_str("Pull"),
            // BrokerUrl's Debug hides the password.
            Target::Broker(b) => f.debug_tuple("Broker").field(b).finish(),
            Target::HttpPush { url, secret } => f
                .debug_struct("HttpPush")
                .field("url", url)
                .field("secret", &secret.as_ref().map(|_| "<redacted>"))
                .finish(),
        }
    }
}

/// Publishes in flight at once of a broker target's kind, unless configured.
pub const DEFAULT_BROKER_CONCURRENCY: usize = 512;

/// Everything backstop needs to know about one kind.
#[derive(Clone, Debug, PartialEq)]
pub struct KindConfig {
    pub name: String,
    pub target: Target,
    pub max_attempts: u32,
    pub retry: RetryPolicy,
    /// How long one attempt may take before it counts as a transient failure.
    pub timeout: Duration,
    /// Attempts of this kind that may run at once in one process.
    pub concurrency: usize,
    /// Default business validity from enqueue time, when the caller gives none.
    pub expires_in: Option<Duration>,
    /// How long a claim holds the task before another process may rescue it.
    pub lease: Duration,
    /// Paused: tasks are accepted and kept, but none is started (no claims, no pull leases)
    /// until the kind is resumed. The reconciler names the pause when they become overdue.
    pub paused: bool,
    /// Ordering per group ([`crate::group`]): `None` orders only tasks enqueued with a group
    /// (with the default `on_failure`).
    pub ordering: Option<crate::group::Ordering>,
    /// The circuit breaker ([`crate::breaker`]): `None` never trips.
    pub breaker: Option<crate::breaker::BreakerConfig>,
    /// The breaker of its target host, shared with every push kind on the host
    /// ([`crate::breaker::HostBreaker`]).
    pub host_breaker: Option<crate::breaker::HostBreaker>,
    /// A 429 or 503 with `Retry-After` pauses the whole target host (every push kind on it)
    /// until then, not only the task that got it (on by default).
    pub pause_on_retry_after: bool,
    /// The guarded entity whose state says whether a task still makes sense
    /// ([`crate::requires`]).
    pub requires: Option<crate::requires::Requires>,
    /// At most so many attempts at once per key of the payload ([`crate::limit`]).
    pub concurrency_limit: Option<crate::limit::ConcurrencyLimit>,
    /// At most so many attempt starts per period per key of the payload
    /// ([`crate::limit::rate`]).
    pub rate_limit: Option<crate::limit::RateLimit>,
    /// At most so many attempts at once across every kind on this kind's target host
    /// ([`crate::limit::host`]; push kinds only).
    pub host_limit: Option<crate::limit::HostMax>,
}

impl KindConfig {
    /// What a failed task of one of this kind's groups does to the rest of its group.
    pub fn on_group_failure(&self) -> crate::group::OnFailure {
        self.ordering
            .as_ref()
            .map(|o| o.on_failure)
            .unwrap_or_default()
    }

    /// Whether it has a limit per key or per host: its claims count and start, holding
    /// nothing ahead.
    pub fn limited(&self) -> bool {
        self.concurrency_limit.is_some() || self.rate_limit.is_some() || self.host_limit.is_some()
    }

    /// What a claim of this kind is told of its limit per key.
    pub fn per_key(&self) -> Option<crate::limit::PerKey> {
        if !self.limited() {
            return None;
        }
        Some(crate::limit::PerKey {
            concurrency: self.concurrency_limit.as_ref().map(|l| l.per_key()),
            rate: self.rate_limit.as_ref().map(|l| l.per_key()),
            host: self.host_limit.clone(),
        })
    }

    /// The group a dead letter of this kind in `group` holds: that group when the kind blocks
    /// on failure, `None` when it skips (or the task has no group).
    pub fn blocked_group<'a>(&self, group: Option<&'a str>) -> Option<&'a str> {
        match self.on_group_failure() {
            crate::group::OnFailure::Block => group,
            crate::group::OnFailure::Skip => None,
        }
    }

    /// A kind with the defaults of DESIGN.md: 8 attempts, exponential 2 s…5 min ±20 %,
    /// 30 s timeout, 32 concurrent attempts (512 for a broker target), a 60 s lease.
    pub fn new(name: impl Into<String>, target: Target) -> Self {
        // A broker target's attempts are publishes pipelined on one channel, each waiting for
        // its confirm: measured on RabbitMQ, 32 in flight reach 0.44 of the raw confirmed
        // ceiling, 512 reach 0.67 (BENCHMARKS.md, "Broker bridges and targets").
        let concurrency = match target {
            Target::Broker(_) => DEFAULT_BROKER_CONCURRENCY,
            _ => 32,
        };
        KindConfig {
            name: name.into(),
            target,
            max_attempts: 8,
            retry: RetryPolicy::default(),
            timeout: Duration::from_secs(30),
            concurrency,
            expires_in: None,
            lease: Duration::from_secs(60),
            paused: false,
            ordering: None,
            breaker: None,
            host_breaker: None,
            pause_on_retry_after: true,
            requires: None,
            concurrency_limit: None,
            rate_limit: None,
            host_limit: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_the_secret() {
        let t = Target::HttpPush {
            url: "http://127.0.0.1/x".into(),
            secret: Some("whsec_c2VjcmV0".into()),
        };
        let shown = format!("{:?}", KindConfig::new("k", t));
        assert!(!shown.contains("whsec_c2VjcmV0"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }
}
