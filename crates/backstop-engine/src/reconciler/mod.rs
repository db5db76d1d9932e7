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
//! - **beat**: the pass is recorded in the `reconciler` beat, which every process watches
//!   ([`nodes`]), and which `backstop doctor` reads.

pub mod nodes;
pub mod overdue;
mod rescue;

use crate::alerts::{AlertEvent, AlertName};
use crate::engine::Shared;
use backstop_core::audit::{Drift, audit};
use backstop_core::store::BeatsParams;
use backstop_core::store::{AuditParams, BacklogParams, BeatParams, KindBacklog};
use backstop_core::{StoreError, TaskId};
use jiff::{SignedDuration, Timestamp};
use overdue::Overdue;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;

/// The beat name of the reconciler's passes.
pub const RECONCILER_BEAT: &str = "reconciler";

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

/// Runs passes every `reconcile_interval` while this process leads, until `stop`.
pub(crate) async fn run(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut leading = shared.leading.subscribe();
    // The last pass: its audit cursor goes on, whoever ran it, and overdue kinds are logged
    // when they change rather than every pass.
    let mut previous: Option<Option<PassReport>> = None;
    loop {
        if !crate::leader::wait_to_lead(&mut leading, &mut stop).await {
            return;
        }
        if previous.is_none() {
            previous = Some(last_pass(&shared).await);
        }
        let report = pass(
            &shared,
            &leading,
            previous.as_ref().and_then(Option::as_ref),
        )
        .await;
        previous = Some(Some(report));
        tokio::select! {
            _ = tokio::time::sleep(shared.opts.rescue_interval) => {}
            _ = stop.changed() => return,
        }
        if !*leading.borrow() {
            previous = None;
        }
    }
}

/// The last recorded pass, by any process.
pub(crate) async fn last_pass(shared: &Shared) -> Option<PassReport> {
    let beats = shared
        .store
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
pub(crate) async fn pass(
    shared: &Shared,
    leading: &watch::Receiver<bool>,
    previous: Option<&PassReport>,
) -> PassReport {
    let started = Instant::now();
    let now = shared.clock.now();
    let mut r = PassReport {
        at: now,
        owner: shared.owner.clone(),
        audit_cursor: previous.and_then(|p| p.audit_cursor),
        ..PassReport::default()
    };
    let rescued = rescue::rescue(shared, leading).await;
    r.rescued = step(&mut r.errors, "rescue", rescued);
    let expired = rescue::expire(shared, leading).await;
    r.expired = step(&mut r.errors, "expire", expired);
    if *leading.borrow() {
        watch_backlog(shared, now, &mut r, previous).await;
    }
    if *leading.borrow() {
        audit_page(shared, &mut r).await;
    }
    r.took_ms = started.elapsed().as_millis() as u64;
    crate::metrics::reconciler_pass(&r);
    if *leading.borrow() {
        let beat = shared.store.beat(BeatParams {
            name: RECONCILER_BEAT.into(),
            owner: shared.owner.clone(),
            at: shared.clock.now(),
            detail: serde_json::to_string(&r).expect("plain data"),
        });
        if let Err(e) = beat.await {
            tracing::error!(error = %e, "recording the reconciler's pass failed");
        }
    }
    r
}

fn step(errors: &mut Vec<String>, what: &str, r: Result<u64, StoreError>) -> u64 {
    r.unwrap_or_else(|e| {
        tracing::error!(error = %e, step = what, "reconciler step failed");
        errors.push(format!("{what}: {e}"));
        0
    })
}

async fn watch_backlog(
    shared: &Shared,
    now: Timestamp,
    r: &mut PassReport,
    previous: Option<&PassReport>,
) {
    let threshold = SignedDuration::try_from(shared.opts.overdue_after).unwrap_or_default();
    let backlog = shared
        .store
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
    let nodes = nodes::live(shared, now).await;
    r.overdue = overdue::judge(&backlog, &nodes, &shared.configs, now - threshold);
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
    if let Some(limit) = shared.opts.backlog_alert {
        for b in backlog.iter().filter(|b| b.pending > limit) {
            let mut a = AlertEvent::new(
                AlertName::Backlog,
                format!("{} tasks pending (threshold {limit})", b.pending),
            );
            a.kind = Some(b.kind.clone());
            shared.alerts.raise(a);
        }
    }
}

async fn audit_page(shared: &Shared, r: &mut PassReport) {
    let page = shared
        .store
        .audit_page(AuditParams {
            after: r.audit_cursor,
            limit: shared.opts.audit_batch,
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
    r.audit_cursor = match page.len() < shared.opts.audit_batch {
        true => None,
        false => page.last().map(|(t, _)| t.id),
    };
    for (task, timeline) in &page {
        for d in audit(task, timeline) {
            tracing::error!(task = %d.id, kind = %d.kind, rule = %d.rule, detail = %d.detail,
                "conservation audit: the ledger disagrees with itself");
            crate::metrics::drift(&d);
            let mut a = AlertEvent::new(AlertName::AuditDrift, format!("{}: {}", d.rule, d.detail));
            a.kind = Some(d.kind.clone());
            a.task = Some(d.id);
            shared.alerts.raise(a);
            r.drift.push(d);
        }
    }
}
