//! The planner loop: every process runs it for every schedule (configured, or registered over
//! the API and kept in the ledger), against the database's clock. Whoever plans an instant
//! first writes its row; the others' inserts are repeats, so a planner that dies costs nothing
//! while another runs, and one that starts after all were down finds the outage in the stored
//! progress.

use super::batch::pass_batch;
use super::clock::{Moving, planning_clock};
use super::registry::registered;
use crate::context::Context;
use backstop_core::schedule::Schedule;
use jiff::{SignedDuration, Timestamp};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The longest the planner sleeps without reading the database's clock again.
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// How often schedules registered over the API are read again.
const REFRESH: Duration = Duration::from_secs(5);

/// How soon a schedule is looked at again after a failed pass, or while a `queue_one`
/// instant waits for the running tick.
const RECHECK: SignedDuration = SignedDuration::from_secs(1);

/// One schedule the planner plans, and when it is next due (`None`: now).
struct Planned {
    schedule: Arc<Schedule>,
    due: Option<Timestamp>,
    /// Registered over the API (replaced or dropped when the ledger says so).
    registered: bool,
}

/// The planner, with what it uses: the context (store, kinds, alerts) and the configured
/// schedules.
pub(crate) struct Planner {
    ctx: Arc<Context>,
    configured: Arc<[Schedule]>,
}

impl Planner {
    pub(crate) fn new(ctx: Arc<Context>, configured: Arc<[Schedule]>) -> Self {
        Planner { ctx, configured }
    }

    /// Plans each schedule when its next instant comes, until `stop`.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut set: BTreeMap<String, Planned> = self
            .configured
            .iter()
            .map(|s| {
                let planned = Planned {
                    schedule: Arc::new(s.clone()),
                    due: None,
                    registered: false,
                };
                (s.name.clone(), planned)
            })
            .collect();
        let mut refreshed: Option<Instant> = None;
        loop {
            if refreshed.is_none_or(|at| at.elapsed() >= REFRESH) {
                self.refresh(&mut set).await;
                refreshed = Some(Instant::now());
            }
            let sleep = if set.is_empty() {
                REFRESH
            } else {
                match planning_clock(&self.ctx).await {
                    Ok(clock) => self.round(clock, &mut set).await,
                    Err(e) => {
                        tracing::warn!(error = %e, "schedules: cannot read the database's clock");
                        Duration::from_secs(1)
                    }
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// Takes in the schedules registered over the API: new ones, changed ones (due at once)
    /// and removed ones. A configured schedule of the same name wins.
    async fn refresh(&self, set: &mut BTreeMap<String, Planned>) {
        let found = match registered(&self.ctx).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "schedules: cannot read the registered schedules");
                return;
            }
        };
        set.retain(|name, p| !p.registered || found.iter().any(|s| &s.name == name));
        for s in found {
            match set.get(&s.name) {
                Some(p) if !p.registered => continue,
                Some(p) if p.schedule.def == s.def => continue,
                _ => {}
            }
            let name = s.name.clone();
            let planned = Planned {
                schedule: Arc::new(s),
                due: None,
                registered: true,
            };
            set.insert(name, planned);
        }
    }

    /// Plans every schedule due at `now`; returns how long to sleep before the next is due.
    async fn round(&self, clock: Moving, set: &mut BTreeMap<String, Planned>) -> Duration {
        let now = clock.now();
        // The schedules due are planned as one batch: their progress read together, their
        // rows written in a few large enqueues and their progress in as many fenced calls,
        // against the round's clock reading moved on by the time the round has taken (so
        // that rows' `created_at` says when they were written).
        let due: Vec<Arc<Schedule>> = set
            .values()
            .filter(|p| p.due.is_none_or(|d| d <= now))
            .map(|p| p.schedule.clone())
            .collect();
        let batch: Vec<&Schedule> = due.iter().map(|s| &**s).collect();
        let results = pass_batch(&self.ctx, &batch, clock).await;
        let mut failed: Option<(usize, String)> = None;
        for (s, r) in due.iter().zip(results) {
            let next_due = match r {
                Ok(r) if r.more => None,
                Ok(r) => {
                    // A schedule with no instant left is never due again.
                    let next = s.times.next_after(now).map_or(Timestamp::MAX, |i| i.at);
                    Some(if r.waiting {
                        next.min(now + RECHECK)
                    } else {
                        next
                    })
                }
                Err(e) => {
                    tracing::debug!(schedule = %s.name, error = %e, "schedules: a planning pass failed");
                    let f = failed.get_or_insert_with(|| (0, format!("{:?}: {e}", s.name)));
                    f.0 += 1;
                    Some(now + RECHECK)
                }
            };
            if let Some(p) = set.get_mut(&s.name) {
                p.due = next_due;
            }
        }
        if let Some((n, first)) = failed {
            tracing::warn!(failed = n, first = %first, "schedules: planning passes failed; again in a second");
        }
        let soonest = set.values().map(|p| p.due.unwrap_or(now)).min();
        match soonest {
            Some(at) => {
                let wait = at.duration_since(now).max(SignedDuration::ZERO);
                Duration::try_from(wait).unwrap_or(MAX_SLEEP).min(MAX_SLEEP)
            }
            None => MAX_SLEEP,
        }
    }
}
