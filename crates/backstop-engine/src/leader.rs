//! Leader election: of the processes that share a database, one runs the singleton duties
//! (lease rescue and expiry, retention; later the reconciler and cron). Leadership is a lease
//! row in the database: the leader renews it every `leader_renew`, for `leader_lease`; the
//! others try to take it on the same beat, and do once it lapses (the leader died) or is
//! resigned (the leader stopped).
//!
//! A leader that cannot renew steps down on its own before its lease would run out (by its
//! monotonic clock, counted from before the renewal that granted it), so that two processes
//! never run the duties at once while clocks agree within `leader_renew`.

use crate::engine::Shared;
use backstop_core::StoreError;
use backstop_core::clock::add;
use backstop_core::store::{Leadership, LeadershipParams, ResignParams};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout_at};

/// The name of the leadership that carries the singleton duties.
pub const SINGLETONS: &str = "singletons";

/// This process's standing, as the loop tracks it.
struct Standing {
    /// When our lease runs out by the monotonic clock, while we lead.
    until: Option<Instant>,
}

/// Keeps trying to lead until `stop`; resigns on the way out.
pub(crate) async fn run(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let opts = &shared.opts;
    let (lease, renew) = (opts.leader_lease, opts.leader_renew);
    let margin = margin(lease, renew);
    crate::metrics::leader(SINGLETONS, false);
    let mut me = Standing { until: None };
    loop {
        if let Some(until) = me.until
            && Instant::now() + margin >= until
        {
            step_down(&shared, &mut me, "its lease could not be renewed in time");
        }
        let sent = Instant::now();
        let now = shared.clock.now();
        let ask = shared.store.acquire_leadership(LeadershipParams {
            name: SINGLETONS.into(),
            owner: shared.owner.clone(),
            now,
            until: add(now, lease),
        });
        // A call that hangs must not keep a leader past its lease.
        let give_up = me.until.map_or(sent + lease, |u| u - margin);
        let answer = tokio::select! {
            a = timeout_at(give_up, ask) => a.unwrap_or_else(|_| {
                Err(StoreError::Database("no answer in time".into()))
            }),
            _ = stop.changed() => break,
        };
        settle(&shared, &mut me, sent + lease, answer);
        let mut next = Instant::now() + renew;
        if let Some(until) = me.until {
            next = next.min(until - margin);
        }
        tokio::select! {
            _ = sleep_until(next) => {}
            _ = stop.changed() => break,
        }
    }
    if me.until.is_some() {
        shared.leading.send_replace(false);
        crate::metrics::leader(SINGLETONS, false);
    }
    // Also when not leading: an acquire cut short by the stop may have been granted. Bounded,
    // so that an unreachable database does not hold up shutdown.
    let resign = shared.store.resign_leadership(ResignParams {
        name: SINGLETONS.into(),
        owner: shared.owner.clone(),
    });
    match tokio::time::timeout(renew.max(Duration::from_secs(1)), resign).await {
        Ok(Ok(true)) => tracing::info!(worker = %shared.owner, "resigned leadership"),
        Ok(Ok(false)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e,
            "could not resign leadership; another process takes over when the lease runs out"),
        Err(_) => tracing::warn!(
            "no answer to resigning leadership; another process takes over when the lease runs out"
        ),
    }
}

/// Acts on one answer: `until` is when a lease granted by it runs out.
fn settle(
    shared: &Shared,
    me: &mut Standing,
    until: Instant,
    answer: Result<Leadership, StoreError>,
) {
    match answer {
        Ok(l) if l.held_by(&shared.owner) => {
            if me.until.is_none() {
                tracing::info!(worker = %shared.owner, since = %l.since, "became leader");
                shared.leading.send_replace(true);
                crate::metrics::leader(SINGLETONS, true);
            }
            me.until = Some(until);
        }
        Ok(l) => {
            if me.until.is_some() {
                let why = format!("{} holds it now", l.owner);
                step_down(shared, me, &why);
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, leading = me.until.is_some(), "leadership renewal failed")
        }
    }
}

fn step_down(shared: &Shared, me: &mut Standing, why: &str) {
    me.until = None;
    shared.leading.send_replace(false);
    crate::metrics::leader(SINGLETONS, false);
    tracing::warn!(worker = %shared.owner, reason = why, "lost leadership");
}

/// Waits until this process leads or `stop`; false on stop.
pub(crate) async fn wait_to_lead(
    leading: &mut watch::Receiver<bool>,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        r = leading.wait_for(|l| *l) => r.is_ok(),
        _ = stop.changed() => false,
    }
}

/// How long before its lease runs out a leader that could not renew steps down: one renewal
/// period (at most half the lease), which also bounds the clock skew between processes that
/// leadership tolerates.
fn margin(lease: Duration, renew: Duration) -> Duration {
    renew.min(lease / 2)
}
