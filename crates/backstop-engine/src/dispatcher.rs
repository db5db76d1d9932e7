//! One dispatcher per kind: claims due tasks in batches as concurrency slots free up, and
//! runs each claimed task as its own attempt.

use crate::engine::Shared;
use crate::executor::Executor;
use crate::inflight::Running;
use crate::metrics::KindMetrics;
use backstop_core::KindConfig;
use backstop_core::clock::add;
use backstop_core::decide::{decide, expired};
use backstop_core::store::{ClaimParams, ClaimedTask, Completion, LeaseRef};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};

/// A configured kind, ready to run.
pub(crate) struct KindRuntime {
    pub(crate) config: KindConfig,
    pub(crate) executor: Executor,
    /// Woken by local enqueues so an idle dispatcher need not wait for its next poll.
    pub(crate) wake: Notify,
    pub(crate) metrics: Arc<KindMetrics>,
}

pub(crate) async fn run(
    shared: Arc<Shared>,
    kind: Arc<KindRuntime>,
    done: mpsc::Sender<Completion>,
    mut stop: watch::Receiver<bool>,
) {
    let cfg = &kind.config;
    let slots = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
    let want = shared.opts.claim_batch.min(cfg.concurrency).max(1);
    loop {
        if *stop.borrow() {
            return;
        }
        let first = tokio::select! {
            p = slots.clone().acquire_owned() => p.expect("never closed"),
            _ = stop.changed() => return,
        };
        let mut permits = vec![first];
        while permits.len() < want {
            match slots.clone().try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
        let asked = permits.len();
        let now = shared.clock.now();
        let claimed = shared
            .store
            .claim(ClaimParams {
                kind: cfg.name.clone(),
                limit: asked,
                owner: shared.owner.clone(),
                now,
                lease_until: add(now, cfg.lease),
            })
            .await;
        let claimed = match claimed {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(kind = %cfg.name, error = %e, "claim failed");
                Vec::new()
            }
        };
        let got = claimed.len();
        for (task, permit) in claimed.into_iter().zip(permits.drain(..)) {
            start(&shared, &kind, task, permit, done.clone());
        }
        drop(permits);
        if got < asked {
            tokio::select! {
                _ = tokio::time::sleep(shared.opts.poll_interval) => {}
                _ = kind.wake.notified() => {}
                _ = stop.changed() => return,
            }
        }
    }
}

fn start(
    shared: &Arc<Shared>,
    kind: &Arc<KindRuntime>,
    task: ClaimedTask,
    permit: OwnedSemaphorePermit,
    done: mpsc::Sender<Completion>,
) {
    let lease = LeaseRef {
        id: task.id,
        epoch: task.epoch,
    };
    shared.inflight.insert(
        lease,
        Running {
            since: Instant::now(),
            lease: kind.config.lease,
            abort: None,
        },
    );
    let shared2 = shared.clone();
    let kind = kind.clone();
    let handle = tokio::spawn(async move {
        let shared = shared2;
        let cfg = &kind.config;
        let started_at = shared.clock.now();
        let (attempt, max_attempts) = (task.attempt, task.max_attempts);
        kind.metrics.attempts.increment(1);
        kind.metrics
            .start_delay
            .record(crate::metrics::since_due(&task, started_at));
        let clock_start = Instant::now();
        let (decision, http_status) = if task.expires_at.is_some_and(|e| e <= started_at) {
            // Past its business validity: compensated, never run.
            (expired(), None)
        } else {
            let report = kind.executor.attempt(task, cfg.timeout, started_at).await;
            let now = shared.clock.now();
            let d = decide(
                attempt,
                max_attempts,
                &report.outcome,
                &cfg.retry,
                now,
                rand::random::<f64>(),
            );
            (d, report.http_status)
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
            started_at,
            ended_at: shared.clock.now(),
            worker: shared.owner.clone(),
        };
        kind.metrics
            .ended(completion.outcome, clock_start.elapsed());
        if completion.status == backstop_core::Status::Failed {
            tracing::warn!(
                task = %lease.id, kind = %cfg.name,
                error = completion.last_error.as_deref().unwrap_or(""),
                reason = completion.reason.as_deref().unwrap_or(""),
                "dead letter: the task failed and waits for a person (retry or resolve)"
            );
        }
        if done.send(completion).await.is_err() {
            tracing::warn!(task = %lease.id, "engine stopped before the outcome was written; the lease will expire and the task will be rescued");
        }
        shared.inflight.remove(&lease);
        drop(permit);
    });
    shared.inflight.set_abort(&lease, handle.abort_handle());
}
