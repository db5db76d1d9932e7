//! The reconciler: an independent loop on the elected leader that keeps the ledger honest.
//! Each pass, in bounded batches through indexes (its cost follows the unfinished work, never
//! the finished history):
//!
//! - **rescue** running tasks whose lease expired (the attempt is recorded as
//!   `lease_expired`, naming who held it and for how long);
//! - **expire** pending tasks past `expires_at`;
//! - **overdue**: pending tasks due longer ago than the threshold, each kind with the reason
//!   it is not running ([`overdue::Why`]);
//! - **audit** the next page of the ledger: each task's timeline must agree with its status
//!   ([`backstop_core::audit`]); drift is reported and alerted, never fixed;
//! - **schedules**: each schedule's planning is not silent, its recent instants have their
//!   rows, and its ticks are neither late nor overrunning
//!   ([`crate::schedules::ScheduleCheck`]);
//! - **beat**: the pass is recorded in the `reconciler` beat, which every process watches
//!   ([`nodes`]), and which `backstop doctor` reads.

pub mod nodes;
pub mod overdue;
mod rescue;

use crate::alerts::event::{AlertEvent, AlertName};
use crate::context::{AlertHub, Context, Kinds};
use crate::options::EngineOptions;
use crate::schedules::check::ScheduleWatch;
use crate::schedules::report::ScheduleCheck;
use backstop_core::audit::{Drift, audit};
use backstop_core::store::BeatsParams;
use backstop_core::store::{AuditParams, BacklogParams, BeatParams, KindBacklog};
use backstop_core::store::{Backlog as BacklogStore, Cluster, Rescue};
use backstop_core::{Clock, StoreError, TaskId};
use jiff::{SignedDuration, Timestamp};
use overdue::Overdue;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

pub use nodes::RECONCILER_BEAT;

/// How many overdue task ids a pass keeps per kind.
const SAMPLE: usize = 5;

/// What one pass did and found; stored as the reconciler's beat.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PassReport {
    /// When the pass began.
    #[serde(with = "backstop_core::wire_time")]
    pub at: Timestamp,
    /// Who ran it.
    pub owner: String,
    pub took_ms: u64,
    /// Tasks whose expired lease was rescued.
    pub rescued: u64,
    /// Pending tasks compensated past `expires_at`.
    pub expired: u64,
    /// Unfinished work per kind.
    pub backlog: Vec<Backlog>,
    /// Kinds with overdue work, and why.
    pub overdue: Vec<Overdue>,
    /// Tasks audited by this pass.
    pub audited: u64,
    /// Where the audit goes on from (it wraps to the start at the end of the ledger).
    pub audit_cursor: Option<TaskId>,
    /// Drift found by this pass.
    pub drift: Vec<Drift>,
    /// The schedules' check: rows of recent instants, late, overrunning and silent.
    #[serde(default)]
    pub schedules: ScheduleCheck,
    /// A step that failed, if any (the pass goes on with the next step).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// [`KindBacklog`] as the report shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backlog {
    pub kind: String,
    pub pending: u64,
    pub due: u64,
    pub overdue: u64,
    pub running: u64,
    #[serde(with = "backstop_core::wire_time::option")]
    pub oldest_run_at: Option<Timestamp>,
}

impl From<&KindBacklog> for Backlog {
    fn from(b: &KindBacklog) -> Self {
        Backlog {
            kind: b.kind.clone(),
            pending: b.pending,
            due: b.due,
            overdue: b.overdue,
            running: b.running,
            oldest_run_at: b.oldest_run_at,
        }
    }
}

impl PassReport {
    /// Reads a stored pass.
    pub fn from_detail(detail: &str) -> Option<Self> {
        serde_json::from_str(detail).ok()
    }
}

/// The reconciler's loop, with what it uses.
pub(crate) struct Reconciler {
    /// Rescues expired leases and compensates expired tasks.
    rescue: Arc<dyn Rescue>,
    /// Reads the backlog and pages of the ledger to audit.
    ledger: Arc<dyn BacklogStore>,
    /// Reads the processes' beats and records the reconciler's own.
    cluster: Arc<dyn Cluster>,
    clock: Arc<dyn Clock>,
    owner: Arc<str>,
    /// The configured kinds, to say why a kind's work is overdue.
    kinds: Arc<Kinds>,
    alerts: AlertHub,
    /// Whether this process leads: passes run only then, and stop between batches without.
    leading: watch::Receiver<bool>,
    interval: Duration,
    overdue_after: Duration,
    backlog_alert: Option<u64>,
    audit_batch: usize,
    node_beat: Duration,
    /// Checks the schedules' rows, ticks and planning.
    schedules: ScheduleWatch,
}

impl Reconciler {
    pub(crate) fn new(ctx: &Context, opts: &EngineOptions, leading: watch::Receiver<bool>) -> Self {
        Reconciler {
            rescue: ctx.store.clone(),
            ledger: ctx.store.clone(),
            cluster: ctx.store.clone(),
            clock: ctx.clock.clone(),
            owner: ctx.owner.clone(),
            kinds: ctx.kinds.clone(),
            alerts: ctx.alerts.clone(),
            leading,
            interval: opts.rescue_interval,
            overdue_after: opts.overdue_after,
            backlog_alert: opts.backlog_alert,
            audit_batch: opts.audit_batch,
            node_beat: opts.node_beat,
            schedules: ScheduleWatch::new(ctx, &opts.retention),
        }
    }

    /// Runs passes every `rescue_interval` while this process leads, until `stop`.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut leading = self.leading.clone();
        let mut previous: Option<Option<PassReport>> = None;
        loop {
            if !crate::leading::wait_to_lead(&mut leading, &mut stop).await {
                return;
            }
            if previous.is_none() {
                previous = Some(self.last_pass().await);
            }
            let report = self.pass(previous.as_ref().and_then(Option::as_ref)).await;
            previous = Some(Some(report));
            tokio::select! {
                _ = tokio::time::sleep(self.interval) => {}
                _ = stop.changed() => return,
            }
            if !*leading.borrow() {
                previous = None;
            }
        }
    }

    /// The last recorded pass, by any process.
    pub(crate) async fn last_pass(&self) -> Option<PassReport> {
        let beats = self
            .cluster
            .beats(BeatsParams {
                prefix: RECONCILER_BEAT.to_string(),
            })
            .await
            .ok()?;
        let b = beats.into_iter().find(|b| b.name == RECONCILER_BEAT)?;
        PassReport::from_detail(&b.detail)
    }

    /// One pass; stops between batches when leadership is lost. Records itself as the
    /// reconciler's beat when it ran while leading.
    pub(crate) async fn pass(&self, previous: Option<&PassReport>) -> PassReport {
        let leading = &self.leading;
        let started = Instant::now();
        let now = self.clock.now();
        let mut r = PassReport {
            at: now,
            owner: self.owner.to_string(),
            audit_cursor: previous.and_then(|p| p.audit_cursor),
            ..PassReport::default()
        };
        let duty = rescue::Duty {
            store: &*self.rescue,
            clock: &*self.clock,
            alerts: &self.alerts,
            kinds: self.kinds.configs(),
            leading,
        };
        let rescued = duty.rescue().await;
        r.rescued = step(&mut r.errors, "rescue", rescued);
        let expired = duty.expire().await;
        r.expired = step(&mut r.errors, "expire", expired);
        if *leading.borrow() {
            self.watch_backlog(now, &mut r, previous).await;
        }
        if *leading.borrow() {
            self.audit_page(&mut r).await;
        }
        if *leading.borrow() {
            let previous = previous.map(|p| &p.schedules);
            r.schedules = self.schedules.check(previous, leading, &mut r.errors).await;
        }
        r.took_ms = started.elapsed().as_millis() as u64;
        crate::metrics::reconciler_pass(
            r.took_ms,
            r.backlog.iter().map(|b| (b.kind.as_str(), b.overdue)),
        );
        if *leading.borrow() {
            let beat = self.cluster.beat(BeatParams {
                name: RECONCILER_BEAT.into(),
                owner: self.owner.to_string(),
                at: self.clock.now(),
                detail: serde_json::to_string(&r).expect("plain data"),
            });
            if let Err(e) = beat.await {
                tracing::error!(error = %e, "recording the reconciler's pass failed");
            }
        }
        r
    }

    async fn watch_backlog(
        &self,
        now: Timestamp,
        r: &mut PassReport,
        previous: Option<&PassReport>,
    ) {
        let threshold = SignedDuration::try_from(self.overdue_after).unwrap_or_default();
        let backlog = self
            .ledger
            .backlog(BacklogParams {
                now,
                overdue_before: now - threshold,
                sample: SAMPLE,
            })
            .await;
        let backlog = match backlog {
            Ok(b) => b,
            Err(e) => {
                step(&mut r.errors, "backlog", Err(e));
                return;
            }
        };
        let nodes = nodes::live(&*self.cluster, self.node_beat, now).await;
        r.overdue = overdue::judge(&backlog, &nodes, self.kinds.configs(), now - threshold);
        r.backlog = backlog.iter().map(Backlog::from).collect();
        let before = |kind: &str| {
            previous.and_then(|p| p.overdue.iter().find(|o| o.kind == kind).map(|o| &o.why))
        };
        for o in &r.overdue {
            if before(&o.kind) != Some(&o.why) {
                tracing::warn!(kind = %o.kind, count = o.count, why = %o.why.explain(), "overdue tasks");
            }
        }
        for p in previous.map(|p| p.overdue.as_slice()).unwrap_or_default() {
            if !r.overdue.iter().any(|o| o.kind == p.kind) {
                tracing::info!(kind = %p.kind, "no overdue tasks any more");
            }
        }
        if let Some(limit) = self.backlog_alert {
            for b in backlog.iter().filter(|b| b.pending > limit) {
                let mut a = AlertEvent::new(
                    AlertName::Backlog,
                    format!("{} tasks pending (threshold {limit})", b.pending),
                );
                a.kind = Some(b.kind.clone());
                self.alerts.raise(a);
            }
        }
    }

    async fn audit_page(&self, r: &mut PassReport) {
        let page = self
            .ledger
            .audit_page(AuditParams {
                after: r.audit_cursor,
                limit: self.audit_batch,
            })
            .await;
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                step(&mut r.errors, "audit", Err(e));
                return;
            }
        };
        r.audited = page.len() as u64;
        // A short page reached the end of the ledger: the next pass starts over.
        r.audit_cursor = match page.len() < self.audit_batch {
            true => None,
            false => page.last().map(|(t, _)| t.id),
        };
        for (task, timeline) in &page {
            for d in audit(task, timeline) {
                tracing::error!(task = %d.id, kind = %d.kind, rule = %d.rule, detail = %d.detail,
                    "conservation audit: the ledger disagrees with itself");
                crate::metrics::drift(&d);
                let mut a =
                    AlertEvent::new(AlertName::AuditDrift, format!("{}: {}", d.rule, d.detail));
                a.kind = Some(d.kind.clone());
                a.task = Some(d.id);
                self.alerts.raise(a);
                r.drift.push(d);
            }
        }
    }
}

fn step(errors: &mut Vec<String>, what: &str, r: Result<u64, StoreError>) -> u64 {
    r.unwrap_or_else(|e| {
        tracing::error!(error = %e, step = what, "reconciler step failed");
        errors.push(format!("{what}: {e}"));
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use backstop_core::Store;
    use backstop_core::clock::add;
    use backstop_core::store::{ClaimParams, EnqueueParams, GetParams};
    use backstop_core::{KindConfig, ManualClock, NewTask, Status, Target};
    use backstop_store_sqlite::SqliteStore;

    #[tokio::test]
    async fn a_pass_built_from_its_handles_rescues_an_expired_lease_and_raises_its_alert() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db").display().to_string();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
        let clock = Arc::new(ManualClock::new(Timestamp::now()));
        let now = clock.now();
        let task = NewTask {
            id: TaskId::new(),
            kind: "k".into(),
            key: "a".into(),
            payload: b"{}".to_vec(),
            max_attempts: 3,
            run_at: now,
            expires_at: None,
            traceparent: None,
            intake: Default::default(),
            origin: None,
            group: None,
        };
        let id = task.id;
        store
            .enqueue(EnqueueParams {
                tasks: vec![task],
                now,
            })
            .await
            .unwrap();
        store
            .claim(ClaimParams {
                kind: "k".into(),
                limit: 1,
                start: 1,
                owner: "gone".into(),
                now,
                lease_until: add(now, Duration::from_secs(10)),
                max_attempts: 3,
                on_group_failure: Default::default(),
                per_key: None,
            })
            .await
            .unwrap();
        clock.advance(Duration::from_secs(11));
        let alerts = AlertHub::new(["k"].into_iter());
        let r = Reconciler {
            rescue: store.clone(),
            ledger: store.clone(),
            cluster: store.clone(),
            clock: clock.clone(),
            owner: "me".into(),
            kinds: Arc::new(Kinds::new(
                vec![KindConfig::new("k", Target::Pull)],
                &Default::default(),
            )),
            alerts: alerts.clone(),
            leading: watch::channel(true).1,
            interval: Duration::from_secs(1),
            overdue_after: Duration::from_secs(60),
            backlog_alert: None,
            audit_batch: 10,
            node_beat: Duration::from_secs(5),
            schedules: ScheduleWatch::with(
                store.clone(),
                Arc::new(Kinds::new(
                    vec![KindConfig::new("k", Target::Pull)],
                    &Default::default(),
                )),
                alerts.clone(),
                clock.clone(),
                Arc::new([]),
                &Default::default(),
            ),
        };
        let report = r.pass(None).await;
        assert_eq!(report.rescued, 1);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(
            store.get(GetParams { id }).await.unwrap().unwrap().status,
            Status::Pending
        );
        let raised = alerts.drain();
        assert_eq!(raised.len(), 1);
        assert_eq!(raised[0].name, AlertName::TaskRescued);
        assert_eq!(raised[0].task, Some(id));
        // The pass is on record for the next one (and for `backstop doctor`).
        assert_eq!(r.last_pass().await.map(|p| p.rescued), Some(1));
    }
}
