//! One dispatcher per kind: claims due tasks in batches, ahead of the concurrency limit, and
//! starts each claimed task's attempt in a slot. Tasks claimed ahead are only held (`held`);
//! an attempt starts, and counts, when a slot takes its task: mostly the slot of an attempt
//! that just ended (`attempt`), otherwise a free one, here.

use crate::attempt::{self, Slot, held_start, lease_of};
use crate::completer::{StartRequest, Write};
use crate::context::{Context, Kind};
use crate::executor::Executor;
use crate::held::Held;
use crate::inflight::InFlight;
use crate::options::EngineOptions;
use crate::pace::Pace;
use crate::pauses::probe_lease;
use crate::pauses::trips::Trips;
use backstop_core::StoreError;
use backstop_core::clock::add;
use backstop_core::pause::Gate;
use backstop_core::store::{ClaimParams, ClaimedTask, LeadershipParams, LeaseRef, ReleaseParams};
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// The shortest wait between two looks of an idle rate-limited kind (a faster rate is met by
/// its burst, not by looking more often).
const MIN_RATE_LOOK: Duration = Duration::from_millis(10);

/// Held tasks whose attempts are being started, with the slots they will run in, and the
/// completer's answer: the leases no longer held (`None`: the start was never written).
type Starting = (
    Vec<(ClaimedTask, OwnedSemaphorePermit)>,
    Option<Vec<LeaseRef>>,
);

/// One kind's dispatcher, with what it uses: the slot handles its attempts share, and how
/// much to claim and how often to look when idle.
pub(crate) struct Dispatcher {
    slot: Slot,
    claim_batch: usize,
    poll_interval: Duration,
}

impl Dispatcher {
    pub(crate) fn new(
        ctx: &Context,
        opts: &EngineOptions,
        inflight: Arc<InFlight>,
        kind: Arc<Kind>,
        executor: Arc<Executor>,
        done: mpsc::Sender<Write>,
        stopping: watch::Receiver<bool>,
    ) -> Self {
        Dispatcher {
            slot: Slot {
                store: ctx.store.clone(),
                checkpoints: ctx.store.clone(),
                clock: ctx.clock.clone(),
                owner: ctx.owner.clone(),
                alerts: ctx.alerts.clone(),
                inflight,
                kind,
                executor,
                held: Arc::new(Held::default()),
                done,
                stopping,
                entities: ctx.store.clone(),
                trips: Trips {
                    pauses: ctx.store.clone(),
                    cluster: ctx.store.clone(),
                    clock: ctx.clock.clone(),
                    owner: ctx.owner.clone(),
                    alerts: ctx.alerts.clone(),
                    kinds: ctx.kinds.clone(),
                },
            },
            claim_batch: opts.claim_batch,
            poll_interval: opts.poll_interval,
        }
    }

    /// Claims and starts the kind's tasks until `stop`, then gives back what it holds.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let slot = &self.slot;
        let (kind, held) = (&slot.kind, &slot.held);
        let cfg = &kind.config;
        let slots = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
        // Tasks are leased ahead of free slots, as many as the kind's pace calls for (`pace`),
        // and only held: their attempts start (and count) when a slot takes them. An ending
        // attempt hands its slot to the next held task; a claim starts at once as many as there
        // are free slots; held tasks left over when slots are free are started here, in batches
        // (`starting`). Held tasks are heartbeated like running ones, so their holds last however
        // long they wait.
        let mut pace = Pace::new(Instant::now());
        let batch = self.claim_batch.max(1);
        let mut claiming: Option<JoinHandle<Result<Vec<ClaimedTask>, StoreError>>> = None;
        let mut starting: Option<JoinHandle<Starting>> = None;
        let mut asked = 0;
        // The last claim found less than it asked for: wait for an enqueue or the poll interval.
        let mut idle = false;
        let mut gate = kind.gate.subscribe();
        let mut probe = ProbeLease::default();
        let limited = cfg.limited();
        // A rate-limited kind looks again once per interval of its rate while idle: its moved
        // tasks fall due one interval apart, and a look only every poll would start each key's
        // burst at most once per poll, below the rate.
        let idle_wait = match &cfg.rate_limit {
            Some(r) => {
                let interval = Duration::from_micros(r.gcra().interval_us as u64);
                interval.clamp(MIN_RATE_LOOK, self.poll_interval.max(MIN_RATE_LOOK))
            }
            None => self.poll_interval,
        };
        loop {
            if *stop.borrow() {
                break;
            }
            let (closed, probing) = (kind.gate.is_closed(), kind.gate.is_probing());
            if closed && held.len() > 0 {
                // Paused: what is held goes back unstarted, spending no attempt.
                give_back(slot, held.drain()).await;
            }
            pace.started(held.started_since(), Instant::now());
            if !closed && !probing && starting.is_none() && held.len() > 0 {
                starting = start_held(slot, &slots);
            }
            let waiting = held.len();
            // A limited kind leases nothing ahead: a held task would start without its key's
            // slots being counted (`backstop_core::limit`).
            let ahead = if limited {
                0
            } else {
                pace.ahead(cfg.concurrency, Instant::now())
            };
            let cap = cfg.concurrency + ahead;
            let running = cfg.concurrency - slots.available_permits();
            if running == 0 && waiting == 0 && claiming.is_none() && starting.is_none() {
                // No probe of this kind is under way here: the host's other kinds may send one.
                probe.give_turn(slot);
            }
            let room = cap.saturating_sub(running + waiting);
            // With nothing waiting, claim for the first free slot (low latency); with tasks
            // waiting, only once a quarter of the room is free (fewer, bigger commits). A
            // limited kind, which holds nothing, claims for a quarter too while attempts run:
            // each of its claims counts the running tasks per key, and one per freed slot cost
            // a third of its throughput.
            let worth = match (waiting, limited) {
                (0, false) => 1,
                (0, true) if running == 0 => 1,
                _ => (cap / 4).max(1),
            };
            // A limited kind waiting for a quarter of its room: slots free one at a time, with
            // no held task to hand them to and no claim of its own to wait for, so nothing
            // else would bring it back here. Each written outcome wakes it (`frees`); the poll
            // covers a wake that came before its slot was given back.
            let gathering = limited && !closed && room > 0 && room < worth;
            let may_claim = if closed {
                false
            } else if probing {
                // One probe at a time, by the one process holding the probe lease (and, of a
                // host's breaker, by one of the host's kinds here at a time).
                running == 0
                    && waiting == 0
                    && claiming.is_none()
                    && starting.is_none()
                    && !idle
                    && probe.take(slot).await
            } else {
                room >= worth
            };
            if claiming.is_none() && !idle && may_claim {
                asked = if probing { 1 } else { room.min(batch) };
                let now = slot.clock.now();
                // Free slots take the first claimed tasks at once; only held tasks wait.
                let start = if waiting == 0 {
                    slots.available_permits()
                } else {
                    0
                };
                let p = ClaimParams::for_kind(cfg, &slot.owner, asked, start, now);
                let store = slot.store.clone();
                claiming = Some(tokio::spawn(async move { store.claim(p).await }));
            }
            tokio::select! {
                r = async { claiming.as_mut().expect("guarded").await }, if claiming.is_some() => {
                    claiming = None;
                    match r {
                        Ok(Ok(tasks)) => {
                            idle = tasks.len() < asked;
                            let n = claimed(slot, &slots, tasks, |t| held.push(t)).await;
                            pace.started(n, Instant::now());
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
                    let n = run_started(slot, r);
                    pace.started(n, Instant::now());
                }
                // A slot freed: start waiting tasks, or (none waiting) look for more work.
                p = slots.clone().acquire_owned(), if (starting.is_none() && waiting > 0) || room == 0 => {
                    drop(p);
                }
                // An ending attempt took a held task: there may be room to claim more.
                _ = held.taken(), if waiting > 0 => {}
                _ = tokio::time::sleep(idle_wait), if (idle || gathering) && claiming.is_none() => idle = false,
                _ = kind.wake.notified(), if idle || gathering => idle = false,
                // Paused, resumed, probing: look again.
                _ = gate.changed() => idle = false,
                // Probing: the next probe (or the probe lease) in a while.
                _ = tokio::time::sleep(self.poll_interval), if probing && claiming.is_none() => {}
                _ = stop.changed() => {}
            }
        }
        // Stopping: attempts already started run (the engine's grace covers them); nothing held
        // may stay held: give it back, unstarted, to run again promptly.
        let mut left = held.close();
        if let Some(h) = starting {
            run_started(slot, h.await);
        }
        if let Some(h) = claiming
            && let Ok(Ok(tasks)) = h.await
        {
            claimed(slot, &slots, tasks, |t| left.push(t)).await;
        }
        give_back(slot, left).await;
        probe.give_turn(slot);
    }
}

/// Gives held tasks back unstarted (shutdown, or the kind paused), to run again promptly.
async fn give_back(slot: &Slot, tasks: Vec<ClaimedTask>) {
    if tasks.is_empty() {
        return;
    }
    let leases: Vec<LeaseRef> = tasks.iter().map(lease_of).collect();
    for l in &leases {
        slot.inflight.remove(l);
    }
    let r = slot
        .store
        .release(ReleaseParams {
            leases,
            worker: slot.owner.to_string(),
            now: slot.clock.now(),
        })
        .await;
    if let Err(e) = r {
        tracing::error!(kind = %slot.kind.config.name, error = %e, "giving back held tasks failed; they are due again when their holds end");
    }
}

/// This process's hold on the probe lease of the breaker its kind is probing (the kind's own,
/// or its host's), and its turn to probe among the host's kinds here.
#[derive(Default)]
struct ProbeLease {
    /// The lease's scope (a kind probing another breaker starts afresh).
    scope: Option<String>,
    /// Held, to be renewed after this.
    renew_at: Option<Instant>,
    /// Refused: not asked again before this.
    retry_at: Option<Instant>,
    /// The breaker whose turn this dispatcher holds, until its probe ends.
    turn: Option<String>,
}

impl ProbeLease {
    /// Takes this process's turn and the probe lease of the breaker being probed; whether a
    /// probe may be sent.
    async fn take(&mut self, slot: &Slot) -> bool {
        let Gate::Probing { scope, .. } = slot.kind.gate.current() else {
            return false;
        };
        if self.turn.is_none() {
            let free = slot
                .kind
                .gate
                .breaker_of(&scope)
                .is_none_or(|b| b.take_probe());
            if !free {
                return false;
            }
            self.turn = Some(scope.clone());
        }
        if self.hold(slot, scope).await {
            return true;
        }
        self.give_turn(slot);
        false
    }

    /// Gives the turn back: no probe of this kind is under way.
    fn give_turn(&mut self, slot: &Slot) {
        if let Some(scope) = self.turn.take()
            && let Some(b) = slot.kind.gate.breaker_of(&scope)
        {
            b.give_probe();
        }
    }

    /// Takes or renews the probe lease of `scope` (at most once per half lease); whether it is
    /// held.
    async fn hold(&mut self, slot: &Slot, scope: String) -> bool {
        if self.scope.as_deref() != Some(scope.as_str()) {
            self.renew_at = None;
            self.retry_at = None;
        }
        let now = Instant::now();
        if self.renew_at.is_some_and(|t| now < t) {
            return true;
        }
        if self.retry_at.is_some_and(|t| now < t) {
            return false;
        }
        let lease = slot.kind.config.lease;
        let at = slot.clock.now();
        let r = slot
            .trips
            .cluster
            .acquire_leadership(LeadershipParams {
                name: probe_lease(&scope),
                owner: slot.owner.to_string(),
                now: at,
                until: add(at, lease),
            })
            .await;
        self.scope = Some(scope);
        match r {
            Ok(l) if l.held_by(&slot.owner) => {
                self.renew_at = Some(now + lease / 2);
                true
            }
            Ok(_) => {
                self.renew_at = None;
                self.retry_at = Some(now + lease.min(Duration::from_secs(1)));
                false
            }
            Err(e) => {
                tracing::warn!(kind = %slot.kind.config.name, error = %e, "taking the probe lease failed");
                self.renew_at = None;
                self.retry_at = Some(now + Duration::from_secs(1));
                false
            }
        }
    }
}

/// Runs what a claim started and gives the rest to `hold`; returns how many attempts it
/// started.
async fn claimed(
    slot: &Slot,
    slots: &Arc<Semaphore>,
    tasks: Vec<ClaimedTask>,
    mut hold: impl FnMut(ClaimedTask),
) -> usize {
    let at = Instant::now();
    let mut n = 0;
    for t in tasks {
        attempt::track(slot, &t, at);
        if t.started {
            // The claim counted its slot: one is free or about to be.
            let permit = slots.clone().acquire_owned().await.expect("never closed");
            attempt::spawn(slot.clone(), t, permit);
            n += 1;
        } else {
            hold(t);
        }
    }
    n
}

/// Takes a free slot for each held task it can, oldest first, and has the completer start
/// their attempts in its next write; `None` when no slot is free.
fn start_held(slot: &Slot, slots: &Arc<Semaphore>) -> Option<JoinHandle<Starting>> {
    let mut batch = Vec::new();
    loop {
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            break;
        };
        let Some(t) = slot.held.take() else {
            break;
        };
        batch.push((t, permit));
    }
    if batch.is_empty() {
        return None;
    }
    let tasks = batch
        .iter()
        .map(|(t, _)| held_start(&slot.kind, t))
        .collect();
    let (answer, answered) = oneshot::channel();
    let done = slot.done.clone();
    Some(tokio::spawn(async move {
        let write = Write {
            outcome: None,
            start: Some(StartRequest { tasks, answer }),
            claim: None,
        };
        let lost = match done.send(write).await {
            Ok(()) => answered.await.ok(),
            Err(_) => None,
        };
        (batch, lost)
    }))
}

/// Runs the attempts a start began; drops the tasks no longer held. Returns how many
/// attempts it started.
fn run_started(slot: &Slot, r: Result<Starting, tokio::task::JoinError>) -> usize {
    match r {
        Ok((batch, lost)) => attempt::run_answered(slot, batch, lost),
        Err(e) => {
            tracing::error!(kind = %slot.kind.config.name, error = %e, "start task failed");
            0
        }
    }
}
