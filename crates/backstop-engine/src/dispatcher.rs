//! One dispatcher per kind: claims due tasks in batches, ahead of the concurrency limit, and
//! runs each claimed task as its own attempt as slots free up. Tasks claimed ahead are only
//! held; an attempt starts, and counts, when a slot takes its task.

use crate::completer::{DeadLetter, Finished, HeldStart, StartRequest, Write};
use crate::engine::Shared;
use crate::executor::Executor;
use crate::inflight::Running;
use crate::metrics::KindMetrics;
use crate::pace::Pace;
use backstop_core::KindConfig;
use backstop_core::StoreError;
use backstop_core::clock::add;
use backstop_core::decide::{decide, expired};
use backstop_core::store::{ClaimParams, ClaimedTask, Completion, LeaseRef, ReleaseParams};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// A configured kind, ready to run.
pub(crate) struct KindRuntime {
    pub(crate) config: KindConfig,
    pub(crate) executor: Executor,
    /// Woken by local enqueues so an idle dispatcher need not wait for its next poll.
    pub(crate) wake: Notify,
    pub(crate) metrics: Arc<KindMetrics>,
}

/// Held tasks whose attempts are being started, with the slots they will run in, and the
/// completer's answer: the leases no longer held (`None`: the start was never written).
type Starting = (
    Vec<(ClaimedTask, OwnedSemaphorePermit)>,
    Option<Vec<LeaseRef>>,
);

pub(crate) async fn run(
    shared: Arc<Shared>,
    kind: Arc<KindRuntime>,
    done: mpsc::Sender<Write>,
    mut stop: watch::Receiver<bool>,
) {
    let cfg = &kind.config;
    let slots = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
    // Tasks are leased ahead of free slots, as many as the kind's pace calls for (`pace`),
    // and only held: their attempts start (and count) when a slot takes them, in batches
    // (`starting`), written by the completer with the outcomes that freed their slots. A claim
    // starts at once as many as there are free slots. Held tasks are heartbeated like running
    // ones, so their holds last however long they wait.
    let mut pace = Pace::new(Instant::now());
    let batch = shared.opts.claim_batch.max(1);
    let mut ready: VecDeque<ClaimedTask> = VecDeque::new();
    let mut claiming: Option<JoinHandle<Result<Vec<ClaimedTask>, StoreError>>> = None;
    let mut starting: Option<JoinHandle<Starting>> = None;
    let mut asked = 0;
    // The last claim found less than it asked for: wait for an enqueue or the poll interval.
    let mut idle = false;
    loop {
        if *stop.borrow() {
            break;
        }
        if starting.is_none() && !ready.is_empty() {
            starting = start_held(&kind, &slots, &mut ready, &done);
        }
        let cap = cfg.concurrency + pace.ahead(cfg.concurrency, Instant::now());
        let running = cfg.concurrency - slots.available_permits();
        let room = cap.saturating_sub(running + ready.len());
        // With nothing waiting, claim for the first free slot (low latency); with tasks
        // waiting, only once a quarter of the room is free (fewer, bigger commits).
        let worth = if ready.is_empty() {
            1
        } else {
            (cap / 4).max(1)
        };
        if claiming.is_none() && !idle && room >= worth {
            asked = room.min(batch);
            let now = shared.clock.now();
            let p = ClaimParams {
                kind: cfg.name.clone(),
                limit: asked,
                // Free slots take the first claimed tasks at once; only held tasks wait.
                start: if ready.is_empty() {
                    slots.available_permits()
                } else {
                    0
                },
                owner: shared.owner.clone(),
                now,
                lease_until: add(now, cfg.lease),
                max_attempts: cfg.max_attempts,
            };
            let store = shared.store.clone();
            claiming = Some(tokio::spawn(async move { store.claim(p).await }));
        }
        tokio::select! {
            r = async { claiming.as_mut().expect("guarded").await }, if claiming.is_some() => {
                claiming = None;
                match r {
                    Ok(Ok(tasks)) => {
                        idle = tasks.len() < asked;
                        let at = Instant::now();
                        for t in tasks {
                            waiting(&shared, &kind, &t, at);
                            if t.started {
                                // The claim counted its slot: one is free or about to be.
                                let permit = slots.clone().acquire_owned().await.expect("never closed");
                                start(&shared, &kind, t, permit, done.clone());
                                pace.started(1, Instant::now());
                            } else {
                                ready.push_back(t);
                            }
                        }
                    }
                    Ok(Err(e)) => {
                        tracing::error!(kind = %cfg.name, error = %e, "claim failed");
                        idle = true;
                    }
                    Err(e) => {
                        tracing::error!(kind = %cfg.name, error = %e, "claim task failed");
                        idle = true;
                    }
                }
            }
            r = async { starting.as_mut().expect("guarded").await }, if starting.is_some() => {
                starting = None;
                let n = run_started(&shared, &kind, r, &done);
                pace.started(n, Instant::now());
            }
            // A slot freed: start waiting tasks, or (none waiting) look for more work.
            p = slots.clone().acquire_owned(), if (starting.is_none() && !ready.is_empty()) || room == 0 => {
                drop(p);
            }
            _ = tokio::time::sleep(shared.opts.poll_interval), if idle && claiming.is_none() => idle = false,
            _ = kind.wake.notified(), if idle => idle = false,
            _ = stop.changed() => {}
        }
    }
    // Stopping: attempts already started run (the engine's grace covers them); nothing held
    // may stay held: give it back, unstarted, to run again promptly.
    if let Some(h) = starting {
        run_started(&shared, &kind, h.await, &done);
    }
    if let Some(h) = claiming
        && let Ok(Ok(tasks)) = h.await
    {
        let at = Instant::now();
        for t in tasks {
            waiting(&shared, &kind, &t, at);
            if t.started {
                let permit = slots.clone().acquire_owned().await.expect("never closed");
                start(&shared, &kind, t, permit, done.clone());
            } else {
                ready.push_back(t);
            }
        }
    }
    if !ready.is_empty() {
        let leases: Vec<LeaseRef> = ready
            .iter()
            .map(|t| LeaseRef {
                id: t.id,
                epoch: t.epoch,
            })
            .collect();
        for l in &leases {
            shared.inflight.remove(l);
        }
        let r = shared
            .store
            .release(ReleaseParams {
                leases,
                worker: shared.owner.clone(),
                now: shared.clock.now(),
            })
            .await;
        if let Err(e) = r {
            tracing::error!(kind = %cfg.name, error = %e, "giving back held tasks failed; they are due again when their holds end");
        }
    }
}

/// Takes a free slot for each held task it can, oldest first, and has the completer start
/// their attempts in its next write; `None` when no slot is free.
fn start_held(
    kind: &KindRuntime,
    slots: &Arc<Semaphore>,
    ready: &mut VecDeque<ClaimedTask>,
    done: &mpsc::Sender<Write>,
) -> Option<JoinHandle<Starting>> {
    let mut batch = Vec::new();
    while !ready.is_empty() {
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            break;
        };
        batch.push((ready.pop_front().expect("not empty"), permit));
    }
    if batch.is_empty() {
        return None;
    }
    let tasks = batch
        .iter()
        .map(|(t, _)| HeldStart {
            lease: LeaseRef {
                id: t.id,
                epoch: t.epoch,
            },
            run_at: t.run_at,
            lease_for: kind.config.lease,
        })
        .collect();
    let (answer, answered) = oneshot::channel();
    let done = done.clone();
    Some(tokio::spawn(async move {
        let asked = done
            .send(Write::Start(StartRequest { tasks, answer }))
            .await;
        let lost = match asked {
            Ok(()) => answered.await.ok(),
            Err(_) => None,
        };
        (batch, lost)
    }))
}

/// Runs the attempts a start call began; drops the tasks no longer held. Returns how many
/// attempts it started.
fn run_started(
    shared: &Arc<Shared>,
    kind: &Arc<KindRuntime>,
    r: Result<Starting, tokio::task::JoinError>,
    done: &mpsc::Sender<Write>,
) -> usize {
    let (batch, lost) = match r {
        Ok((batch, Some(lost))) => (batch, lost),
        Ok((batch, None)) => {
            // Unknown whether they started: not run here. Holds lapse and the tasks are
            // claimed again; one that did start is rescued with its attempt recorded.
            tracing::error!(kind = %kind.config.name, tasks = batch.len(), "starting held tasks was never written");
            for (t, _) in &batch {
                shared.inflight.remove(&LeaseRef {
                    id: t.id,
                    epoch: t.epoch,
                });
            }
            return 0;
        }
        Err(e) => {
            tracing::error!(kind = %kind.config.name, error = %e, "start task failed");
            return 0;
        }
    };
    let mut n = 0;
    for (mut t, permit) in batch {
        let lease = LeaseRef {
            id: t.id,
            epoch: t.epoch,
        };
        if lost.contains(&lease) {
            tracing::debug!(kind = %kind.config.name, task = %t.id, "a held task was no longer held; not run");
            shared.inflight.remove(&lease);
            continue;
        }
        t.started = true;
        start(shared, kind, t, permit, done.clone());
        n += 1;
    }
    n
}

/// Registers a task leased ahead, so the heartbeat keeps its lease while it waits.
fn waiting(shared: &Shared, kind: &KindRuntime, t: &ClaimedTask, claimed: Instant) {
    shared.inflight.insert(
        LeaseRef {
            id: t.id,
            epoch: t.epoch,
        },
        Running {
            since: claimed,
            lease: kind.config.lease,
            abort: None,
        },
    );
}

fn start(
    shared: &Arc<Shared>,
    kind: &Arc<KindRuntime>,
    task: ClaimedTask,
    permit: OwnedSemaphorePermit,
    done: mpsc::Sender<Write>,
) {
    let lease = LeaseRef {
        id: task.id,
        epoch: task.epoch,
    };
    // Registered in the in-flight registry when it was claimed (`waiting`).
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
        shared.alerts.attempt(&cfg.name, completion.outcome);
        // Announced by the completer once written (a stale outcome makes no dead letter).
        let dead_letter =
            (completion.status == backstop_core::Status::Failed).then(|| DeadLetter {
                kind: cfg.name.clone(),
                error: completion.last_error.clone().unwrap_or_default(),
                reason: completion.reason.clone().unwrap_or_default(),
            });
        let finished = Finished {
            completion,
            dead_letter,
        };
        if done.send(Write::Outcome(Box::new(finished))).await.is_err() {
            tracing::warn!(task = %lease.id, "engine stopped before the outcome was written; the lease will expire and the task will be rescued");
        }
        shared.inflight.remove(&lease);
        drop(permit);
    });
    shared.inflight.set_abort(&lease, handle.abort_handle());
}
