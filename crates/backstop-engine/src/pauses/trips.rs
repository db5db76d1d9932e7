//! The breaker at work: each attempt's outcome is counted by its kind's gate; a trip, a
//! `Retry-After`, a probe's success or failure is written to the ledger as a pause or a
//! resume, which every process then obeys. Writes run beside the attempt, never in its way;
//! the process whose write changed the ledger raises the alert, so a trip seen by many
//! processes alerts once.

use super::probe_lease;
use crate::alerts::event::{AlertEvent, AlertName};
use crate::context::{AlertHub, Kind, Kinds};
use crate::gate::ScopeBreaker;
use backstop_core::breaker::Seen;
use backstop_core::clock::add;
use backstop_core::duration::format_duration;
use backstop_core::pause::{Gate, PauseCause, PauseRecord, cool_down, scope_host};
use backstop_core::store::{Cluster, PauseParams, Pauses, ResignParams, ResumeParams};
use backstop_core::{Clock, Outcome};
use std::sync::Arc;
use std::time::Instant;

/// What the breaker writes with.
#[derive(Clone)]
pub(crate) struct Trips {
    pub(crate) pauses: Arc<dyn Pauses>,
    pub(crate) cluster: Arc<dyn Cluster>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) owner: Arc<str>,
    pub(crate) alerts: AlertHub,
    pub(crate) kinds: Arc<Kinds>,
}

impl Trips {
    /// Counts an attempt of `kind` that ended with `outcome` (`http_status`: the target's
    /// answer); returns what it did to the kind's dispatch, in words, for its attempt's note.
    pub(crate) fn after_attempt(
        &self,
        kind: &Kind,
        outcome: &Outcome,
        http_status: Option<u16>,
    ) -> Option<String> {
        let seen = match outcome {
            Outcome::Retry { .. } => Seen::Transient,
            Outcome::Suspend => return None,
            _ => Seen::Answered,
        };
        let mut notes = Vec::new();
        if let Some(n) = self.asked_to_wait(kind, outcome, http_status) {
            notes.push(n);
        }
        // The common case, open, is answered from the gate's atomic; a kind without a breaker
        // counts nothing. An attempt that ends while the kind is closed started before the
        // pause: its outcome says nothing new.
        if kind.gate.is_open() {
            for (b, why) in kind.gate.count(seen, Instant::now()) {
                notes.push(self.trip(kind, b, 1, why));
            }
        } else if let Gate::Probing { trips, scope, .. } = kind.gate.current() {
            let succeeded = seen == Seen::Answered;
            crate::metrics::breaker_probe(&kind.config.name, succeeded);
            let breaker = kind.gate.breaker_of(&scope);
            notes.push(match breaker {
                Some(b) if !succeeded => self.trip(kind, b, trips + 1, "a probe failed".into()),
                Some(b) if !b.probe_succeeded() => "probe succeeded".to_string(),
                // A breaker no longer configured: the first answer closes what it left.
                None if !succeeded => "a probe failed".to_string(),
                _ => {
                    self.close(kind, breaker, scope);
                    "probe succeeded: the breaker closes".to_string()
                }
            });
        }
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    /// A 429 or 503 with `Retry-After` pauses the whole target host until then (bounded by the
    /// kind's retry cap, as the task's own retry is): every kind posting to it, on every
    /// process. A kind without a host (none of its own) pauses alone.
    fn asked_to_wait(
        &self,
        kind: &Kind,
        outcome: &Outcome,
        http_status: Option<u16>,
    ) -> Option<String> {
        let cfg = &kind.config;
        let (
            Outcome::Retry {
                after: Some(after), ..
            },
            Some(status @ (429 | 503)),
        ) = (outcome, http_status)
        else {
            return None;
        };
        if !cfg.pause_on_retry_after {
            return None;
        }
        let wait = cfg.retry.bounded(*after);
        let now = self.clock.now();
        // What pauses: the kind's target host, or (no host of its own) the kind alone.
        let (scope, from, what) = match &kind.gate.host_scope {
            Some(scope) => {
                let host = scope_host(scope).unwrap_or_default();
                (scope.clone(), format!(" from host {host}"), "host")
            }
            None => (kind.gate.scope.clone(), String::new(), "kind"),
        };
        let record = PauseRecord {
            scope,
            cause: PauseCause::RetryAfter,
            reason: format!(
                "HTTP {status} with Retry-After: {}{from}",
                format_duration(wait)
            ),
            until: Some(add(now, wait)),
            trips: 0,
            by: self.owner.to_string(),
            since: now,
        };
        self.close_here(&record);
        self.write(kind, record, None);
        Some(format!(
            "the target asked to wait {}: the {what} is paused until then",
            format_duration(wait)
        ))
    }

    /// Writes the `trips`-th trip in a row of breaker `b` (the kind's own or its host's);
    /// returns the note.
    fn trip(&self, kind: &Kind, b: &ScopeBreaker, trips: u32, why: String) -> String {
        b.reset();
        let wait = cool_down(b.config.cool_down, b.config.max_cool_down, trips);
        let now = self.clock.now();
        let at = match &b.host {
            Some((host, kinds)) => format!(" at host {host} (its kinds {})", kinds.join(", ")),
            None => String::new(),
        };
        let reason = format!(
            "{why}{at}; cool-down {} (trip {trips} in a row)",
            format_duration(wait)
        );
        let record = PauseRecord {
            scope: b.scope.clone(),
            cause: PauseCause::Breaker,
            reason: reason.clone(),
            until: Some(add(now, wait)),
            trips,
            by: self.owner.to_string(),
            since: now,
        };
        // One alert per outage: on the first trip, not on each failed probe.
        let alert = (trips == 1).then(|| AlertEvent {
            name: AlertName::TargetUnhealthy,
            kind: Some(kind.config.name.clone()),
            task: None,
            detail: format!(
                "{}: {reason}; nothing is sent until a probe succeeds",
                kind.config.name
            ),
        });
        self.close_here(&record);
        self.write(kind, record, alert);
        format!("tripped the breaker: {reason}")
    }

    /// Closes here at once every gate `record` governs (the kind that wrote it, and every kind
    /// here on its host when it is the host's), so that no hand-off of this process starts
    /// anything before the watch reads the row back.
    fn close_here(&self, record: &PauseRecord) {
        let closed = Gate::Closed {
            cause: record.cause,
            reason: record.reason.clone(),
            until: record.until,
            by: record.by.clone(),
            since: record.since,
        };
        for k in self.kinds.all() {
            if k.gate.governed_by(record) {
                k.gate.force(closed.clone());
            }
        }
    }

    /// Writes a pause and, when it changed the ledger, raises `alert` and has the watch read it.
    fn write(&self, kind: &Kind, record: PauseRecord, alert: Option<AlertEvent>) {
        let this = self.clone();
        let name = kind.config.name.clone();
        let lease = probe_lease(&record.scope);
        tokio::spawn(async move {
            let cause = record.cause;
            match this.pauses.pause(PauseParams { record }).await {
                Ok(true) => {
                    if let Some(a) = alert {
                        tracing::warn!(kind = %name, detail = %a.detail, "target unhealthy");
                        this.alerts.raise(a);
                    }
                    if cause == PauseCause::Breaker {
                        crate::metrics::breaker_tripped(&name);
                        this.resign(lease).await;
                    }
                    this.kinds.pauses_changed.notify_one();
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::error!(kind = %name, %cause, error = %e, "writing a pause failed; the next failures try again")
                }
            }
        });
    }

    /// Closes the breaker of `scope` (`b`, when still configured): clears its pause and any
    /// `Retry-After` of the same scope.
    fn close(&self, kind: &Kind, b: Option<&ScopeBreaker>, scope: String) {
        if let Some(b) = b {
            b.reset();
        }
        let this = self.clone();
        let name = kind.config.name.clone();
        let host = scope_host(&scope).map(|h| format!(" (host {h})"));
        tokio::spawn(async move {
            let r = this
                .pauses
                .resume(ResumeParams {
                    scope: scope.clone(),
                    causes: vec![PauseCause::Breaker, PauseCause::RetryAfter],
                    reason: "a probe succeeded".into(),
                    by: this.owner.to_string(),
                    now: this.clock.now(),
                })
                .await;
            let host = host.unwrap_or_default();
            match r {
                Ok(removed) if removed.iter().any(|p| p.cause == PauseCause::Breaker) => {
                    tracing::info!(kind = %name, %scope, "target recovered: the breaker closed");
                    this.alerts.raise(AlertEvent {
                        name: AlertName::TargetRecovered,
                        kind: Some(name.clone()),
                        task: None,
                        detail: format!("{name}{host}: a probe succeeded; dispatch resumed"),
                    });
                    this.resign(super::probe_lease(&scope)).await;
                    this.kinds.pauses_changed.notify_one();
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(kind = %name, error = %e, "closing the breaker failed; the next probe tries again")
                }
            }
        });
    }

    async fn resign(&self, lease: String) {
        let r = self
            .cluster
            .resign_leadership(ResignParams {
                name: lease,
                owner: self.owner.to_string(),
            })
            .await;
        if let Err(e) = r {
            tracing::debug!(error = %e, "giving up the probe lease failed; it lapses");
        }
    }
}
