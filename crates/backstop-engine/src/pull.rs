//! Pull leases: workers in any language lease due tasks of `pull` kinds, heartbeat them and
//! report outcomes. The same fences as the engine's own dispatchers apply: a completion counts
//! only while its epoch is current.

use crate::engine::Engine;
use crate::lease_token::LeaseToken;
use backstop_core::clock::add;
use backstop_core::decide::{decide, expired};
use backstop_core::store::{ClaimParams, ClaimedTask, CompleteParams, Completion, HeartbeatParams};
use backstop_core::store::{GetParams, TimelineParams};
use backstop_core::{Outcome, RetryPolicy, Status, StoreError, Target};
use jiff::Timestamp;
use std::future::Future;
use std::time::{Duration, Instant};

/// The ledger keeps times to the millisecond; what a worker is told matches what is stored.
fn to_ms(t: Timestamp) -> Timestamp {
    Timestamp::from_millisecond(t.as_millisecond()).unwrap_or(t)
}

/// Longest accepted worker name, in bytes.
pub const MAX_WORKER_LEN: usize = 128;

/// A worker asks for tasks.
#[derive(Clone, Debug)]
pub struct LeaseRequest {
    /// Pull kinds to lease from, in order of preference.
    pub kinds: Vec<String>,
    /// Most tasks to return.
    pub max: usize,
    /// How long the lease lasts (and how far each heartbeat extends it).
    pub lease: Duration,
    /// The worker's name, recorded on each attempt.
    pub worker: String,
    /// How long to wait for work when none is due (long poll); zero answers at once.
    pub wait: Duration,
}

/// One leased task.
#[derive(Clone, Debug)]
pub struct Leased {
    /// The token for heartbeat and completion.
    pub token: String,
    pub task: ClaimedTask,
    pub lease_until: Timestamp,
}

/// What a completion did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completed {
    /// The task's status now.
    pub status: Status,
    /// When it runs again, for a retry.
    pub run_at: Option<Timestamp>,
}

/// Why a pull request was refused.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error("unknown kind {0:?} (configured kinds: {1})")]
    UnknownKind(String, String),
    #[error("kind {0:?} is not a pull kind: its tasks are delivered by backstop itself")]
    NotPull(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    BadToken(#[from] crate::lease_token::BadToken),
    /// The lease expired or was taken over; the outcome was not recorded as the task's.
    #[error("the lease was lost: it expired or another worker holds the task now")]
    LeaseLost,
    /// This attempt already ended with another outcome; the new one was not recorded.
    #[error(
        "this attempt was already completed as {recorded}; a second, different outcome ({asked}) is not recorded"
    )]
    AlreadyCompleted {
        /// The outcome on record.
        recorded: &'static str,
        /// The outcome this request asked for.
        asked: &'static str,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn task_error(o: &Outcome) -> &str {
    match o {
        Outcome::Retry { error, .. } | Outcome::Fail { error } => error,
        Outcome::Success | Outcome::Skip { .. } | Outcome::Suspend => "",
    }
}

impl Engine {
    /// Leases up to `r.max` due tasks of the given pull kinds, waiting up to `r.wait` for work
    /// to become due. Returns early (possibly empty) when `stop` resolves.
    pub async fn lease(
        &self,
        r: LeaseRequest,
        stop: impl Future<Output = ()>,
    ) -> Result<Vec<Leased>, PullError> {
        self.check_lease_request(&r)?;
        let ctx = &self.ctx;
        let deadline = Instant::now() + r.wait;
        let owner = format!("pull:{}", r.worker);
        let mut stop = std::pin::pin!(stop);
        let now = ctx.clock.now();
        for k in r.kinds.iter().filter_map(|k| ctx.kinds.get(k)) {
            *k.pulled.lock().expect("not poisoned") = Some(now);
        }
        loop {
            // Registered before the claim, so an enqueue between the claim and the wait
            // still wakes this request.
            let notified = ctx.kinds.pull_wake.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let got = self.claim_pull(&r, &owner).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if !got.is_empty() || left.is_zero() {
                return Ok(got);
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(left.min(self.parts.opts.poll_interval)) => {}
                _ = &mut stop => return Ok(Vec::new()),
            }
        }
    }

    fn check_lease_request(&self, r: &LeaseRequest) -> Result<(), PullError> {
        if r.kinds.is_empty() {
            return Err(PullError::Invalid(
                "kinds must name at least one kind".into(),
            ));
        }
        for k in &r.kinds {
            match self.ctx.kinds.configs().get(k) {
                None => return Err(PullError::UnknownKind(k.clone(), self.ctx.kinds.names())),
                Some(c) if c.target != Target::Pull => return Err(PullError::NotPull(k.clone())),
                Some(_) => {}
            }
        }
        if r.max == 0 {
            return Err(PullError::Invalid("max must be at least 1".into()));
        }
        if r.lease < Duration::from_secs(1) {
            return Err(PullError::Invalid("lease must be at least 1s".into()));
        }
        if r.worker.is_empty() || r.worker.len() > MAX_WORKER_LEN {
            return Err(PullError::Invalid(format!(
                "worker must be 1 to {MAX_WORKER_LEN} bytes"
            )));
        }
        if r.worker.chars().any(char::is_control) {
            return Err(PullError::Invalid(
                "worker must not contain control characters".into(),
            ));
        }
        Ok(())
    }

    async fn claim_pull(&self, r: &LeaseRequest, owner: &str) -> Result<Vec<Leased>, PullError> {
        let ctx = &self.ctx;
        let configs = ctx.kinds.configs();
        let mut out = Vec::new();
        let mut refused_now = Vec::new();
        for kind in &r.kinds {
            let want = r.max - out.len();
            if want == 0 {
                break;
            }
            // Paused (in config, by hand, by a `Retry-After`): nothing is leased.
            if ctx.kinds.get(kind).is_some_and(|k| k.gate.is_closed()) {
                continue;
            }
            let now = to_ms(ctx.clock.now());
            let lease_until = add(now, r.lease);
            let claimed = ctx
                .store
                .claim(ClaimParams {
                    kind: kind.clone(),
                    limit: want,
                    start: want,
                    owner: owner.to_string(),
                    now,
                    lease_until,
                    // Checked to be configured (check_lease_request).
                    max_attempts: configs.get(kind).map_or(8, |k| k.max_attempts),
                    on_group_failure: configs
                        .get(kind)
                        .map(|k| k.on_group_failure())
                        .unwrap_or_default(),
                    per_key: configs.get(kind).and_then(|k| k.per_key()),
                })
                .await?;
            for task in claimed {
                let refused = if task.expires_at.is_some_and(|e| e <= now) {
                    // Past its business validity: compensated, never handed out.
                    Some(expired())
                } else if let Some(k) = ctx.kinds.get(kind) {
                    // Its guarded entity says it no longer makes sense: not handed out.
                    crate::guard::refuse(&*ctx.store, &*ctx.clock, k, &task).await
                } else {
                    None
                };
                if let Some(d) = refused {
                    refused_now.push(Completion {
                        lease: backstop_core::store::LeaseRef {
                            id: task.id,
                            epoch: task.epoch,
                        },
                        attempt: task.attempt,
                        status: d.status,
                        run_at: d.run_at,
                        last_error: d.last_error,
                        reason: d.reason,
                        outcome: d.attempt_outcome,
                        http_status: None,
                        note: None,
                        started_at: now,
                        ended_at: now,
                        worker: owner.to_string(),
                    });
                    continue;
                }
                if let Some(k) = ctx.kinds.get(kind) {
                    k.metrics.attempts.increment(1);
                    k.metrics
                        .start_delay
                        .record(crate::metrics::since_due(&task, now));
                }
                let token = LeaseToken {
                    lease: backstop_core::store::LeaseRef {
                        id: task.id,
                        epoch: task.epoch,
                    },
                    attempt: task.attempt,
                    started_at: now,
                    lease_for: r.lease,
                    owner: owner.to_string(),
                };
                out.push(Leased {
                    token: token.encode(),
                    task,
                    lease_until,
                });
            }
        }
        if !refused_now.is_empty() {
            let now = ctx.clock.now();
            ctx.store
                .complete(CompleteParams {
                    starts: None,
                    completions: refused_now,
                    claims: Vec::new(),
                    now,
                })
                .await?;
        }
        Ok(out)
    }

    /// A completion of an attempt that already ended: the outcome this token reported (to
    /// compare with the new one) and the task's answer, or `None` when this attempt's end is
    /// not on record.
    async fn already_recorded(
        &self,
        task: &backstop_core::Task,
        t: &LeaseToken,
    ) -> Result<Option<(backstop_core::AttemptOutcome, Completed)>, PullError> {
        use backstop_core::{AttemptOutcome, EventType};
        let events = self
            .ctx
            .store
            .timeline(TimelineParams { id: task.id })
            .await?;
        let mine = events.iter().rev().find(|e| {
            e.kind == EventType::Attempt
                && e.attempt == Some(t.attempt)
                && e.worker.as_deref() == Some(t.owner.as_str())
        });
        let recorded = mine.and_then(|e| e.outcome).filter(|o| {
            !matches!(
                o,
                AttemptOutcome::LeaseExpired | AttemptOutcome::Interrupted
            )
        });
        Ok(recorded.map(|o| {
            (
                o,
                Completed {
                    status: task.status,
                    run_at: (task.status == Status::Pending).then_some(task.run_at),
                },
            )
        }))
    }

    /// Gives a leased task back unfinished (a worker shutting down): it is due again at once,
    /// and the attempt is recorded as interrupted.
    pub async fn release_lease(&self, token: &str) -> Result<(), PullError> {
        let t = LeaseToken::decode(token)?;
        let n = self
            .ctx
            .store
            .release(backstop_core::store::ReleaseParams {
                leases: vec![t.lease],
                worker: t.owner,
                now: self.ctx.clock.now(),
            })
            .await?;
        if n == 0 {
            return Err(PullError::LeaseLost);
        }
        self.ctx.kinds.pull_wake.notify_waiters();
        Ok(())
    }

    /// Extends the lease a token names by the lease length it was taken with; returns the
    /// new end of the lease.
    pub async fn heartbeat_lease(&self, token: &str) -> Result<Timestamp, PullError> {
        let t = LeaseToken::decode(token)?;
        let now = to_ms(self.ctx.clock.now());
        let lease_until = add(now, t.lease_for);
        let lost = self
            .ctx
            .store
            .heartbeat(HeartbeatParams {
                owner: t.owner,
                leases: vec![t.lease],
                lease_until,
                now,
            })
            .await?;
        if lost.is_empty() {
            Ok(lease_until)
        } else {
            Err(PullError::LeaseLost)
        }
    }

    /// Records the outcome of the attempt a token names. The kind's retry policy decides what
    /// the task becomes, exactly as for pushed tasks. A stale token is rejected, and the
    /// rejection is recorded on the task's timeline.
    pub async fn complete_lease(
        &self,
        token: &str,
        outcome: Outcome,
    ) -> Result<Completed, PullError> {
        let t = LeaseToken::decode(token)?;
        let ctx = &self.ctx;
        let task = ctx
            .store
            .get(GetParams { id: t.lease.id })
            .await?
            .ok_or(PullError::LeaseLost)?;
        let default_policy = RetryPolicy::default();
        let policy = ctx
            .kinds
            .configs()
            .get(&task.kind)
            .map_or(&default_policy, |k| &k.retry);
        let now = to_ms(ctx.clock.now());
        let d = decide(
            t.attempt,
            task.max_attempts,
            &outcome,
            policy,
            now,
            rand::random::<f64>(),
        );
        // A repeated completion (the worker retrying after a lost answer) is answered as the
        // first was; a different outcome for the same attempt is refused, not dropped.
        if task.epoch == t.lease.epoch
            && task.status != Status::Running
            && let Some((recorded, done)) = self.already_recorded(&task, &t).await?
        {
            if recorded != d.attempt_outcome {
                return Err(PullError::AlreadyCompleted {
                    recorded: recorded.as_str(),
                    asked: d.attempt_outcome.as_str(),
                });
            }
            return Ok(done);
        }
        let result = ctx
            .store
            .complete(CompleteParams {
                starts: None,
                completions: vec![Completion {
                    lease: t.lease,
                    attempt: t.attempt,
                    status: d.status,
                    run_at: d.run_at,
                    last_error: d.last_error,
                    reason: d.reason.clone(),
                    outcome: d.attempt_outcome,
                    http_status: None,
                    note: None,
                    started_at: t.started_at,
                    ended_at: now,
                    worker: t.owner,
                }],
                claims: Vec::new(),
                now,
            })
            .await?;
        if !result.stale.is_empty() {
            crate::metrics::stale(result.stale.len());
            return Err(PullError::LeaseLost);
        }
        if let Some(k) = ctx.kinds.get(&task.kind) {
            let took = (now.as_millisecond() - t.started_at.as_millisecond()).max(0) as u64;
            k.metrics
                .ended(d.attempt_outcome, Duration::from_millis(took));
        }
        ctx.alerts.attempt(&task.kind, d.attempt_outcome);
        match d.status {
            Status::Pending => ctx.kinds.pull_wake.notify_waiters(),
            Status::Failed => {
                let error = task_error(&outcome);
                tracing::warn!(
                    task = %task.id, kind = %task.kind, key = %task.key, error,
                    "dead letter: the task failed and waits for a person (retry or resolve)"
                );
                let reason = d.reason.as_deref().unwrap_or("");
                ctx.alerts.dead_letter(&task.kind, task.id, error, reason);
                let configs = ctx.kinds.configs();
                let blocks = configs
                    .get(&task.kind)
                    .and_then(|k| k.blocked_group(task.group.as_deref()));
                if let Some(g) = blocks {
                    ctx.alerts.group_blocked(&task.kind, g, task.id, error);
                }
            }
            _ => {}
        }
        Ok(Completed {
            status: d.status,
            run_at: d.run_at,
        })
    }
}
