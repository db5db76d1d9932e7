//! One attempt of a push or in-process task, run in a slot of its kind's concurrency, and the
//! hand-off of that slot when it ends.
//!
//! When the attempt ends, its slot goes to the next held task of the kind: that task's start
//! is sent with the outcome, so the completer writes both in one transaction, and the next
//! attempt runs once that write is durable. Measured with `backstop bench http`: a start
//! written on its own (one more commit on SQLite's single writer per batch of freed slots, and
//! a slot idle until it lands) cut push delivery to 0.20× its raw ceiling, from 0.49×.

use crate::checkpoint::AttemptControl;
use crate::completer::{ClaimRequest, DeadLetter, Finished, HeldStart, StartRequest, Write};
use crate::context::{AlertHub, Kind};
use crate::executor::Executor;
use crate::held::Held;
use crate::inflight::{InFlight, Running};
use crate::pauses::trips::Trips;
use backstop_core::decide::{decide, expired};
use backstop_core::store::{Checkpointed, Checkpoints, Entities, Leases, SuspendParams};
use backstop_core::store::{ClaimedTask, Completion, LeaseRef};
use backstop_core::{Clock, Outcome};
use jiff::Timestamp;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot, watch};

/// What an attempt needs beyond its task: its kind, the kind's held tasks (for the hand-off)
/// and the completer's inbox.
#[derive(Clone)]
pub(crate) struct Slot {
    pub(crate) store: Arc<dyn Leases>,
    /// Where running attempts save their cursors and suspend.
    pub(crate) checkpoints: Arc<dyn Checkpoints>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) owner: Arc<str>,
    pub(crate) alerts: AlertHub,
    /// The leases this process holds: an attempt is heartbeaten while it is in here.
    pub(crate) inflight: Arc<InFlight>,
    pub(crate) kind: Arc<Kind>,
    pub(crate) executor: Arc<Executor>,
    pub(crate) held: Arc<Held>,
    pub(crate) done: mpsc::Sender<Write>,
    /// Turns true when the engine is shutting down: resumable handlers stop and suspend.
    pub(crate) stopping: watch::Receiver<bool>,
    /// Where outcomes trip and close the kind's breaker.
    pub(crate) trips: Trips,
    /// Where a kind's `requires` reads its guarded entity.
    pub(crate) entities: Arc<dyn Entities>,
}

/// The lease a claimed task is held or run under.
pub(crate) fn lease_of(t: &ClaimedTask) -> LeaseRef {
    LeaseRef {
        id: t.id,
        epoch: t.epoch,
    }
}

/// A held task's start, for the completer.
pub(crate) fn held_start(kind: &Kind, t: &ClaimedTask) -> HeldStart {
    HeldStart {
        lease: lease_of(t),
        run_at: t.run_at,
        lease_for: kind.config.lease,
    }
}

/// Runs a started attempt of `task` in the slot `permit` holds. The task is already in the
/// in-flight registry (registered when it was claimed).
pub(crate) fn spawn(slot: Slot, task: ClaimedTask, permit: OwnedSemaphorePermit) {
    let lease = lease_of(&task);
    let inflight = slot.inflight.clone();
    let handle = tokio::spawn(async move {
        let finished = run(&slot, task).await;
        hand_off(slot, lease, finished, permit).await;
    });
    inflight.set_abort(&lease, handle.abort_handle());
}

/// Runs the attempt (or finds the task past its validity) and decides what it leads to;
/// `None` when a resumable handler suspended at shutdown (written here, not by the completer).
async fn run(slot: &Slot, task: ClaimedTask) -> Option<Finished> {
    let kind = &slot.kind;
    let cfg = &kind.config;
    let lease = lease_of(&task);
    let started_at = slot.clock.now();
    let (attempt, max_attempts) = (task.attempt, task.max_attempts);
    let blocks = cfg.blocked_group(task.group.as_deref()).map(String::from);
    let grouped = task.group.is_some();
    kind.metrics.attempts.increment(1);
    kind.metrics
        .start_delay
        .record(crate::metrics::since_due(&task, started_at));
    let clock_start = Instant::now();
    let refused = if task.expires_at.is_some_and(|e| e <= started_at) {
        // Past its business validity: compensated, never run.
        Some(expired())
    } else {
        // Its guarded entity says it no longer makes sense: compensated, never run.
        crate::guard::refuse(&*slot.entities, &*slot.clock, kind, &task).await
    };
    let (decision, http_status, note) = if let Some(d) = refused {
        (d, None, None)
    } else {
        let control = AttemptControl {
            store: slot.checkpoints.clone(),
            clock: slot.clock.clone(),
            lease,
            attempt,
            worker: slot.owner.clone(),
            stopping: slot.stopping.clone(),
        };
        let report = slot
            .executor
            .attempt(task, control, cfg.timeout, started_at)
            .await;
        if report.outcome == Outcome::Suspend && *slot.stopping.borrow() {
            suspend(slot, lease, attempt, started_at).await;
            return None;
        }
        let now = slot.clock.now();
        // The breaker counts it; a trip, a probe or a Retry-After is noted on the attempt.
        let effect = slot
            .trips
            .after_attempt(kind, &report.outcome, report.http_status);
        let note = match (report.note, effect) {
            (Some(n), Some(e)) => Some(format!("{n}; {e}")),
            (n, e) => n.or(e),
        };
        let d = decide(
            attempt,
            max_attempts,
            &report.outcome,
            &cfg.retry,
            now,
            rand::random::<f64>(),
        );
        (d, report.http_status, note)
    };
    let completion = Completion {
        lease,
        attempt,
        status: decision.status,
        run_at: decision.run_at,
        last_error: decision.last_error,
        reason: decision.reason,
        outcome: decision.attempt_outcome,
        http_status,
        note,
        started_at,
        ended_at: slot.clock.now(),
        worker: slot.owner.to_string(),
    };
    kind.metrics
        .ended(completion.outcome, clock_start.elapsed());
    slot.alerts.attempt(&cfg.name, completion.outcome);
    // Announced by the completer once written (a stale outcome makes no dead letter).
    let dead_letter = (completion.status == backstop_core::Status::Failed).then(|| DeadLetter {
        kind: cfg.name.clone(),
        error: completion.last_error.clone().unwrap_or_default(),
        reason: completion.reason.clone().unwrap_or_default(),
        blocks,
    });
    Some(Finished {
        completion,
        dead_letter,
        // A limited kind's dispatcher may have found keys full: once this attempt's end is
        // written, its key has a free slot. A grouped task's end makes the next of its group
        // due: without a wake it would wait for the next poll, and one busy group would drain
        // one task per poll interval (measured: 4 a second with the default 250 ms).
        frees: (cfg.concurrency_limit.is_some() || cfg.host_limit.is_some() || grouped)
            .then(|| slot.kind.clone()),
    })
}

/// Gives a suspended attempt back uncounted, its cursor kept. When that cannot be written the
/// task stays running until its lease lapses and is rescued like any interrupted attempt.
async fn suspend(slot: &Slot, lease: LeaseRef, attempt: u32, started_at: Timestamp) {
    let kind = &slot.kind.config.name;
    let r = slot
        .checkpoints
        .suspend(SuspendParams {
            lease,
            attempt,
            worker: slot.owner.to_string(),
            cursor: None,
            started_at,
            now: slot.clock.now(),
        })
        .await;
    match r {
        Ok(Checkpointed::Saved) => {
            tracing::info!(task = %lease.id, %kind, attempt, "suspended at shutdown with its checkpoint; the attempt is not counted")
        }
        Ok(Checkpointed::Rejected) => {
            tracing::warn!(task = %lease.id, %kind, "a suspension came after the lease was lost; not recorded as the task's")
        }
        Err(e) => {
            tracing::error!(task = %lease.id, %kind, error = %e, "suspending failed; the task is rescued when its lease expires")
        }
    }
}

/// Registers a claimed task, so the heartbeat keeps its lease while it waits and runs.
pub(crate) fn track(slot: &Slot, t: &ClaimedTask, claimed: Instant) {
    slot.inflight.insert(
        lease_of(t),
        Running {
            since: claimed,
            lease: slot.kind.config.lease,
            abort: None,
        },
    );
}

/// Sends the outcome, with the start of the next held task when there is one, and runs that
/// task in this slot once its start is written. The slot is freed when nothing is held, when
/// the next task was no longer held, or when its start was never written. A limited kind
/// holds nothing: its outcome goes with a claim for the slot instead ([`ClaimRequest`]).
async fn hand_off(
    slot: Slot,
    lease: LeaseRef,
    finished: Option<Finished>,
    permit: OwnedSemaphorePermit,
) {
    if slot.kind.config.limited() && finished.is_some() && slot.store.claims_ride_completions() {
        return hand_off_claimed(slot, lease, finished, permit).await;
    }
    // A paused kind starts nothing; a probing one starts its probes one at a time, from
    // the dispatcher.
    let next = if slot.kind.gate.is_open() {
        slot.held.take()
    } else {
        None
    };
    let (start, answered) = match &next {
        Some(t) => {
            let (answer, answered) = oneshot::channel();
            let tasks = vec![held_start(&slot.kind, t)];
            (Some(StartRequest { tasks, answer }), Some(answered))
        }
        None => (None, None),
    };
    let write = Write {
        outcome: finished,
        start,
        claim: None,
    };
    send(&slot, lease, write).await;
    let (Some(next), Some(answered)) = (next, answered) else {
        return;
    };
    let n = run_answered(&slot, vec![(next, permit)], answered.await.ok());
    slot.held.started(n);
}

/// Hands an ended attempt's write to the completer; the lease is no longer this slot's to
/// heartbeat.
async fn send(slot: &Slot, lease: LeaseRef, write: Write) {
    if slot.done.send(write).await.is_err() {
        tracing::warn!(task = %lease.id, "engine stopped before the outcome was written; the lease will expire and the task will be rescued");
    }
    slot.inflight.remove(&lease);
}

/// A limited kind's hand-off: the outcome goes with a claim for this slot, and the task it
/// claims runs here once the write is durable; the slot is freed when it claims nothing.
async fn hand_off_claimed(
    slot: Slot,
    lease: LeaseRef,
    finished: Option<Finished>,
    permit: OwnedSemaphorePermit,
) {
    // A paused or probing kind claims from the dispatcher only.
    let (claim, answered) = if slot.kind.gate.is_open() {
        let (answer, answered) = oneshot::channel();
        let claim = ClaimRequest {
            kind: slot.kind.clone(),
            answer,
        };
        (Some(claim), Some(answered))
    } else {
        (None, None)
    };
    let write = Write {
        outcome: finished,
        start: None,
        claim,
    };
    send(&slot, lease, write).await;
    let Some(answered) = answered else { return };
    if let Ok(Some(next)) = answered.await {
        track(&slot, &next, Instant::now());
        spawn(slot, next, permit);
    }
}

/// Runs the attempts of held tasks whose start the completer answered (`lost`: the leases no
/// longer held; `None`: the start was never written) and drops the others, freeing their
/// slots. Returns how many attempts it started.
pub(crate) fn run_answered(
    slot: &Slot,
    batch: Vec<(ClaimedTask, OwnedSemaphorePermit)>,
    lost: Option<Vec<LeaseRef>>,
) -> usize {
    let name = &slot.kind.config.name;
    let Some(lost) = lost else {
        // Unknown whether they started: not run here. Holds lapse and the tasks are claimed
        // again; one that did start is rescued with its attempt recorded.
        tracing::error!(kind = %name, tasks = batch.len(), "starting held tasks was never written");
        for (t, _) in &batch {
            slot.inflight.remove(&lease_of(t));
        }
        return 0;
    };
    let mut n = 0;
    for (mut t, permit) in batch {
        let lease = lease_of(&t);
        if lost.contains(&lease) {
            tracing::debug!(kind = %name, task = %t.id, "a held task was no longer held; not run");
            slot.inflight.remove(&lease);
            continue;
        }
        t.started = true;
        spawn(slot.clone(), t, permit);
        n += 1;
    }
    n
}
