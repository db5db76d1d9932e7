//! Writes attempt outcomes in batches: whatever has finished since the last write goes in
//! one transaction, with the starts of the held tasks the dispatchers put into the slots
//! those outcomes freed (a start waits at most one write, and costs no commit of its own). A failed write is retried, never dropped while the engine runs; after
//! shutdown it is retried for the grace period only. Either way, outcomes that never reach
//! the ledger leave their leases to expire, and the tasks are rescued and run again
//! (at-least-once, same idempotency key).
//!
//! A dead letter is announced (log and `task.failed` alert) only once its outcome is written
//! and counted: an outcome rejected as stale (its lease was lost and the task rescued) made
//! no dead letter, whatever the attempt saw.

use crate::context::{AlertHub, Context, Kind, Kinds};
use crate::options::EngineOptions;
use backstop_core::Clock;
use backstop_core::clock::add;
use backstop_core::store::Leases;
use backstop_core::store::{ClaimParams, ClaimedTask, CompleteParams, Completion, LeaseRef};
use backstop_core::store::{StartParams, StartTask};
use jiff::Timestamp;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};

/// What the completer writes: an attempt's outcome, held tasks to start, or both (an
/// attempt handing its slot to the next held task: both land in one write); or, for a kind
/// limited per key, an outcome with a claim for the slot it frees.
pub(crate) struct Write {
    pub(crate) outcome: Option<Finished>,
    pub(crate) start: Option<StartRequest>,
    pub(crate) claim: Option<ClaimRequest>,
}

/// A limited kind's ended attempt asks for the next task for its slot. A limited kind holds
/// nothing ahead (a held task would start without its key counted), so instead the write of
/// its outcomes claims in the same transaction, after them: the claim counts the slots they
/// freed, and refilling a slot costs no commit of its own. The requests of one kind in a
/// write make one claim.
pub(crate) struct ClaimRequest {
    pub(crate) kind: Arc<Kind>,
    /// The task claimed (and started) for the slot; `None` when nothing could start, or
    /// dropped when the write never landed.
    pub(crate) answer: oneshot::Sender<Option<ClaimedTask>>,
}

/// Held tasks a dispatcher gave slots to. The answer is the leases no longer held (don't run
/// those); no answer means the write never landed while the engine ran (shutting down), so
/// whether they started is unknown.
pub(crate) struct StartRequest {
    pub(crate) tasks: Vec<HeldStart>,
    pub(crate) answer: oneshot::Sender<Vec<LeaseRef>>,
}

/// One held task to start, leased for `lease_for` from the write that starts it.
pub(crate) struct HeldStart {
    pub(crate) lease: LeaseRef,
    pub(crate) run_at: Timestamp,
    pub(crate) lease_for: Duration,
}

/// An attempt's outcome on its way to the ledger.
pub(crate) struct Finished {
    pub(crate) completion: Completion,
    /// Set when the outcome ends the task `failed`: announced once it is written.
    pub(crate) dead_letter: Option<DeadLetter>,
    /// A kind limited per key (or per host), whose dispatcher is woken once this is written (a
    /// slot of the task's key is free then, not before); a host's other kinds are woken too.
    pub(crate) frees: Option<Arc<Kind>>,
}

/// What a new dead letter's announcement says.
pub(crate) struct DeadLetter {
    pub(crate) kind: String,
    pub(crate) error: String,
    pub(crate) reason: String,
    /// The ordering group it holds (its kind blocks on failure), if any.
    pub(crate) blocks: Option<String>,
}

/// The loop that writes outcomes and starts, with what it uses.
pub(crate) struct Completer {
    store: Arc<dyn Leases>,
    clock: Arc<dyn Clock>,
    owner: Arc<str>,
    alerts: AlertHub,
    /// To wake every kind on a limited host when one of them frees a slot.
    kinds: Arc<Kinds>,
    /// Most outcomes one write records.
    batch: usize,
    /// How long a failing write is retried after shutdown is asked.
    grace: Duration,
}

impl Completer {
    pub(crate) fn new(ctx: &Context, opts: &EngineOptions) -> Self {
        Completer {
            store: ctx.store.clone(),
            clock: ctx.clock.clone(),
            owner: ctx.owner.clone(),
            alerts: ctx.alerts.clone(),
            kinds: ctx.kinds.clone(),
            batch: opts.complete_batch,
            grace: opts.grace,
        }
    }

    /// Writes what arrives on `rx` until every sender is gone.
    pub(crate) async fn run(self, mut rx: mpsc::Receiver<Write>, stop: watch::Receiver<bool>) {
        let (batch, grace) = (self.batch, self.grace);
        let mut give_up_at: Option<Instant> = None;
        let mut buf = Vec::with_capacity(batch);
        let mut outcomes: Vec<Finished> = Vec::with_capacity(batch);
        let mut starts: Vec<StartRequest> = Vec::new();
        let mut claims: Vec<ClaimRequest> = Vec::new();
        while rx.recv_many(&mut buf, batch).await > 0 {
            for w in buf.drain(..) {
                outcomes.extend(w.outcome);
                starts.extend(w.start);
                claims.extend(w.claim);
            }
            if *stop.borrow() {
                // Shutting down: nothing new starts; the slots go free.
                claims.clear();
            }
            let by_kind = claims_by_kind(&claims);
            let mut wait = Duration::from_millis(50);
            loop {
                let now = self.clock.now();
                let p = CompleteParams {
                    completions: outcomes.iter().map(|f| f.completion.clone()).collect(),
                    starts: start_params(&self.owner, &starts, now),
                    // Each kind's leases measured from the write's `now`, as the starts' are.
                    claims: by_kind
                        .iter()
                        .map(|(k, n)| ClaimParams::for_kind(&k.config, &self.owner, *n, *n, now))
                        .collect(),
                    now,
                };
                match self.store.complete(p).await {
                    Ok(r) => {
                        crate::metrics::stale(r.stale.len());
                        for s in &r.stale {
                            tracing::warn!(task = %s.id, epoch = s.epoch, "completion rejected: the lease was lost");
                        }
                        announce(&self.alerts, &outcomes, &r.stale);
                        let filled =
                            answer_claims(std::mem::take(&mut claims), &by_kind, r.claimed);
                        for k in outcomes.iter().filter_map(|f| f.frees.as_ref()) {
                            if filled.contains(k.config.name.as_str()) {
                                // Every slot of the kind this write freed, it refilled.
                                continue;
                            }
                            match &k.config.host_limit {
                                // The freed slot is the host's: any of its kinds may take it.
                                Some(host) => self.kinds.wake(&host.kinds),
                                None => k.wake.notify_one(),
                            }
                        }
                        answer(std::mem::take(&mut starts), &r.not_started);
                        break;
                    }
                    Err(e) => {
                        if *stop.borrow() {
                            let deadline =
                                *give_up_at.get_or_insert_with(|| Instant::now() + grace);
                            if Instant::now() >= deadline {
                                tracing::error!(error = %e, count = outcomes.len(), "shutting down with outcomes unwritten; their leases will expire and the tasks will be rescued");
                                // Unanswered: the dispatchers do not run what may not have started.
                                starts.clear();
                                claims.clear();
                                break;
                            }
                        }
                        tracing::error!(error = %e, count = outcomes.len(), starts = starts.len(), "writing completions failed; retrying");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(5));
                    }
                }
            }
            outcomes.clear();
        }
    }
}

/// The starts of one write, each lease measured from the write's `now`: a write retried after
/// a failure still gives each started attempt its whole lease.
fn start_params(owner: &str, starts: &[StartRequest], now: Timestamp) -> Option<StartParams> {
    if starts.is_empty() {
        return None;
    }
    Some(StartParams {
        owner: owner.to_owned(),
        tasks: starts
            .iter()
            .flat_map(|s| &s.tasks)
            .map(|t| StartTask {
                lease: t.lease,
                run_at: t.run_at,
                lease_until: add(now, t.lease_for),
            })
            .collect(),
        now,
    })
}

/// The kinds asking for tasks in one write, each once, with how many slots they ask for.
fn claims_by_kind(claims: &[ClaimRequest]) -> Vec<(Arc<Kind>, usize)> {
    let mut by_kind: Vec<(Arc<Kind>, usize)> = Vec::new();
    for c in claims {
        match by_kind.iter_mut().find(|(k, _)| Arc::ptr_eq(k, &c.kind)) {
            Some((_, n)) => *n += 1,
            None => by_kind.push((c.kind.clone(), 1)),
        }
    }
    by_kind
}

/// Gives each slot that asked a task its kind's claim took (`by_kind`: the claims' kinds, in
/// the order of `claimed`), in the order they asked; returns the kinds that asked and had
/// every slot filled.
fn answer_claims(
    claims: Vec<ClaimRequest>,
    by_kind: &[(Arc<Kind>, usize)],
    claimed: Vec<Vec<ClaimedTask>>,
) -> HashSet<String> {
    let mut got: Vec<std::vec::IntoIter<ClaimedTask>> =
        claimed.into_iter().map(Vec::into_iter).collect();
    let mut filled: HashSet<String> = by_kind.iter().map(|(k, _)| k.config.name.clone()).collect();
    for c in claims {
        let i = by_kind
            .iter()
            .position(|(k, _)| Arc::ptr_eq(k, &c.kind))
            .expect("every request's kind is listed");
        let task = got.get_mut(i).and_then(Iterator::next);
        if task.is_none() {
            filled.remove(&c.kind.config.name);
        }
        // A slot that stopped waiting has nothing to run; its task's lease lapses.
        let _ = c.answer.send(task);
    }
    filled
}

/// Tells each dispatcher which of its tasks were no longer held.
fn answer(starts: Vec<StartRequest>, not_started: &[LeaseRef]) {
    let lost: HashSet<&LeaseRef> = not_started.iter().collect();
    for s in starts {
        let mine = s
            .tasks
            .iter()
            .map(|t| t.lease)
            .filter(|l| lost.contains(l))
            .collect();
        // A dispatcher that stopped waiting has nothing to run.
        let _ = s.answer.send(mine);
    }
}

/// Announces the dead letters among outcomes just written, except those rejected as stale.
fn announce(alerts: &AlertHub, written: &[Finished], stale: &[LeaseRef]) {
    let stale: HashSet<&LeaseRef> = stale.iter().collect();
    for f in written {
        let Some(d) = &f.dead_letter else { continue };
        let lease = &f.completion.lease;
        if stale.contains(lease) {
            continue;
        }
        tracing::warn!(
            task = %lease.id, kind = %d.kind, error = %d.error, reason = %d.reason,
            "dead letter: the task failed and waits for a person (retry or resolve)"
        );
        alerts.dead_letter(&d.kind, lease.id, &d.error, &d.reason);
        if let Some(g) = &d.blocks {
            alerts.group_blocked(&d.kind, g, lease.id, &d.error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backstop_core::Store;
    use backstop_core::store::{ClaimParams, EnqueueParams, GetParams};
    use backstop_core::{AttemptOutcome, NewTask, Status, SystemClock, TaskId};
    use backstop_store_sqlite::SqliteStore;

    #[tokio::test]
    async fn starts_a_held_task_and_writes_an_outcome_in_one_write_with_its_handles_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db").display().to_string();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let now = clock.now();
        let tasks = (0..2)
            .map(|i| NewTask {
                id: TaskId::new(),
                kind: "k".into(),
                key: format!("t{i}"),
                payload: b"{}".to_vec(),
                max_attempts: 3,
                run_at: now,
                expires_at: None,
                traceparent: None,
                intake: Default::default(),
                origin: None,
                group: None,
            })
            .collect();
        store.enqueue(EnqueueParams { tasks, now }).await.unwrap();
        // One claimed and started, one only held.
        let claimed = store
            .claim(ClaimParams {
                kind: "k".into(),
                limit: 2,
                start: 1,
                owner: "me".into(),
                now,
                lease_until: add(now, Duration::from_secs(60)),
                max_attempts: 3,
                on_group_failure: Default::default(),
                per_key: None,
            })
            .await
            .unwrap();
        let (running, held) = match claimed[0].started {
            true => (&claimed[0], &claimed[1]),
            false => (&claimed[1], &claimed[0]),
        };
        let lease = |t: &backstop_core::store::ClaimedTask| LeaseRef {
            id: t.id,
            epoch: t.epoch,
        };
        let completer = Completer {
            store: store.clone(),
            clock: clock.clone(),
            owner: "me".into(),
            alerts: AlertHub::new(["k"].into_iter()),
            kinds: Arc::new(crate::context::Kinds::new(Vec::new(), &Default::default())),
            batch: 16,
            grace: Duration::from_secs(1),
        };
        let (tx, rx) = mpsc::channel(4);
        let (_stop, stop) = watch::channel(false);
        let run = tokio::spawn(completer.run(rx, stop));
        let (answer, answered) = oneshot::channel();
        let write = Write {
            claim: None,
            outcome: Some(Finished {
                completion: Completion {
                    lease: lease(running),
                    attempt: running.attempt,
                    status: Status::Succeeded,
                    run_at: None,
                    last_error: None,
                    reason: None,
                    outcome: AttemptOutcome::Succeeded,
                    http_status: None,
                    note: None,
                    started_at: now,
                    ended_at: now,
                    worker: "me".into(),
                },
                dead_letter: None,
                frees: None,
            }),
            start: Some(StartRequest {
                tasks: vec![HeldStart {
                    lease: lease(held),
                    run_at: held.run_at,
                    lease_for: Duration::from_secs(60),
                }],
                answer,
            }),
        };
        tx.send(write).await.unwrap();
        assert_eq!(
            answered.await.unwrap(),
            Vec::<LeaseRef>::new(),
            "still held"
        );
        drop(tx);
        run.await.unwrap();
        let done = store
            .get(GetParams { id: running.id })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(done.status, Status::Succeeded);
        let started = store.get(GetParams { id: held.id }).await.unwrap().unwrap();
        assert_eq!(started.status, Status::Running);
        assert_eq!(started.attempts, 1);
    }

    /// A limited kind's ended attempt gets the next task for its slot from the write of its
    /// outcome: the claim in that transaction counts the slot freed, and takes the next task of
    /// the key whose slot it was, the other key being full.
    #[tokio::test]
    async fn a_limited_kinds_outcome_claims_the_next_task_for_its_slot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db").display().to_string();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let now = clock.now();
        let tasks = ["a", "b", "a"]
            .iter()
            .enumerate()
            .map(|(i, tenant)| NewTask {
                id: TaskId::new(),
                kind: "k".into(),
                key: format!("t{i}"),
                payload: format!(r#"{{"tenant":"{tenant}"}}"#).into_bytes(),
                max_attempts: 3,
                run_at: add(now, Duration::from_millis(i as u64)) - Duration::from_secs(1),
                expires_at: None,
                traceparent: None,
                intake: Default::default(),
                origin: None,
                group: None,
            })
            .collect();
        store.enqueue(EnqueueParams { tasks, now }).await.unwrap();
        let mut cfg = backstop_core::KindConfig::new("k", backstop_core::Target::InProcess);
        cfg.concurrency_limit = Some(backstop_core::limit::ConcurrencyLimit {
            key: "/tenant".into(),
            max: 1,
            missing_key: Default::default(),
        });
        let kinds = Arc::new(crate::context::Kinds::new(
            vec![cfg.clone()],
            &Default::default(),
        ));
        let kind = kinds.get("k").unwrap().clone();
        let claimed = store
            .claim(ClaimParams {
                kind: "k".into(),
                limit: 4,
                start: 4,
                owner: "me".into(),
                now,
                lease_until: add(now, Duration::from_secs(60)),
                max_attempts: 3,
                on_group_failure: Default::default(),
                per_key: cfg.per_key(),
            })
            .await
            .unwrap();
        let keys: Vec<&str> = claimed.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["t0", "t1"], "one of each tenant");
        let completer = Completer {
            store: store.clone(),
            clock: clock.clone(),
            owner: "me".into(),
            alerts: AlertHub::new(["k"].into_iter()),
            kinds,
            batch: 16,
            grace: Duration::from_secs(1),
        };
        let (tx, rx) = mpsc::channel(4);
        let (_stop, stop) = watch::channel(false);
        let run = tokio::spawn(completer.run(rx, stop));
        let (answer, answered) = oneshot::channel();
        let done = &claimed[0];
        tx.send(Write {
            outcome: Some(Finished {
                completion: Completion {
                    lease: LeaseRef {
                        id: done.id,
                        epoch: done.epoch,
                    },
                    attempt: done.attempt,
                    status: Status::Succeeded,
                    run_at: None,
                    last_error: None,
                    reason: None,
                    outcome: AttemptOutcome::Succeeded,
                    http_status: None,
                    note: None,
                    started_at: now,
                    ended_at: now,
                    worker: "me".into(),
                },
                dead_letter: None,
                frees: Some(kind.clone()),
            }),
            start: None,
            claim: Some(ClaimRequest { kind, answer }),
        })
        .await
        .unwrap();
        let next = answered.await.unwrap().expect("a task for the slot");
        assert_eq!(next.key, "t2", "a's next task, b being full");
        assert!(next.started);
        drop(tx);
        run.await.unwrap();
        let row = store.get(GetParams { id: next.id }).await.unwrap().unwrap();
        assert_eq!((row.status, row.attempts), (Status::Running, 1));
        let first = store.get(GetParams { id: done.id }).await.unwrap().unwrap();
        assert_eq!(first.status, Status::Succeeded);
    }
}
