//! Leader election: of the processes that share a database, one runs the singleton duties
//! (lease rescue and expiry, retention; later the reconciler and cron). Leadership is a lease
//! row in the database: the leader renews it every `leader_renew`, for `leader_lease`; the
//! others try to take it on the same beat, and do once it lapses (the leader died) or is
//! resigned (the leader stopped).
//!
//! A leader that cannot renew steps down on its own before its lease would run out (by its
//! monotonic clock, counted from before the renewal that granted it), so that two processes
//! never run the duties at once while clocks agree within `leader_renew`.

use crate::context::Context;
use crate::options::EngineOptions;
use backstop_core::clock::add;
use backstop_core::store::Cluster;
use backstop_core::store::{Leadership, LeadershipParams, ResignParams};
use backstop_core::{Clock, StoreError};
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

/// The leadership loop, with what it uses.
pub(crate) struct Leader {
    store: Arc<dyn Cluster>,
    clock: Arc<dyn Clock>,
    owner: Arc<str>,
    /// How long a granted lease lasts, and how often it is renewed.
    lease: Duration,
    renew: Duration,
    /// Where this process's standing is announced to the singleton duties.
    leading: watch::Sender<bool>,
}

impl Leader {
    pub(crate) fn new(ctx: &Context, opts: &EngineOptions, leading: watch::Sender<bool>) -> Self {
        Leader {
            store: ctx.store.clone(),
            clock: ctx.clock.clone(),
            owner: ctx.owner.clone(),
            lease: opts.leader_lease,
            renew: opts.leader_renew,
            leading,
        }
    }

    /// Keeps trying to lead until `stop`; resigns on the way out.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let (lease, renew) = (self.lease, self.renew);
        let margin = margin(lease, renew);
        crate::metrics::leader(SINGLETONS, false);
        let mut me = Standing { until: None };
        loop {
            if let Some(until) = me.until
                && Instant::now() + margin >= until
            {
                self.step_down(&mut me, "its lease could not be renewed in time");
            }
            let sent = Instant::now();
            let now = self.clock.now();
            let ask = self.store.acquire_leadership(LeadershipParams {
                name: SINGLETONS.into(),
                owner: self.owner.to_string(),
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
            self.settle(&mut me, sent + lease, answer);
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
            self.leading.send_replace(false);
            crate::metrics::leader(SINGLETONS, false);
        }
        // Also when not leading: an acquire cut short by the stop may have been granted.
        // Bounded, so that an unreachable database does not hold up shutdown.
        let resign = self.store.resign_leadership(ResignParams {
            name: SINGLETONS.into(),
            owner: self.owner.to_string(),
        });
        match tokio::time::timeout(renew.max(Duration::from_secs(1)), resign).await {
            Ok(Ok(true)) => tracing::info!(worker = %self.owner, "resigned leadership"),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e,
                "could not resign leadership; another process takes over when the lease runs out"),
            Err(_) => tracing::warn!(
                "no answer to resigning leadership; another process takes over when the lease runs out"
            ),
        }
    }

    /// Acts on one answer: `until` is when a lease granted by it runs out.
    fn settle(&self, me: &mut Standing, until: Instant, answer: Result<Leadership, StoreError>) {
        match answer {
            Ok(l) if l.held_by(&self.owner) => {
                if me.until.is_none() {
                    tracing::info!(worker = %self.owner, since = %l.since, "became leader");
                    self.leading.send_replace(true);
                    crate::metrics::leader(SINGLETONS, true);
                }
                me.until = Some(until);
            }
            Ok(l) => {
                if me.until.is_some() {
                    let why = format!("{} holds it now", l.owner);
                    self.step_down(me, &why);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, leading = me.until.is_some(), "leadership renewal failed")
            }
        }
    }

    fn step_down(&self, me: &mut Standing, why: &str) {
        me.until = None;
        self.leading.send_replace(false);
        crate::metrics::leader(SINGLETONS, false);
        tracing::warn!(worker = %self.owner, reason = why, "lost leadership");
    }
}

/// How long before its lease runs out a leader that could not renew steps down: one renewal
/// period (at most half the lease), which also bounds the clock skew between processes that
/// leadership tolerates.
fn margin(lease: Duration, renew: Duration) -> Duration {
    renew.min(lease / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use backstop_core::Store;
    use backstop_core::SystemClock;
    use backstop_store_sqlite::SqliteStore;

    /// A leader loop built from its handles alone: a store, a clock, a name and a watch.
    fn leader(store: &Arc<dyn Store>, owner: &str, leading: watch::Sender<bool>) -> Leader {
        Leader {
            store: store.clone(),
            clock: Arc::new(SystemClock),
            owner: owner.into(),
            lease: Duration::from_secs(5),
            renew: Duration::from_millis(50),
            leading,
        }
    }

    #[tokio::test]
    async fn leads_an_unled_ledger_and_resigns_on_stop_so_the_next_takes_over_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.db").display().to_string();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
        let (stop, stopped) = watch::channel(false);
        let a = watch::Sender::new(false);
        let mut a_leads = a.subscribe();
        let run = tokio::spawn(leader(&store, "a", a).run(stopped));
        tokio::time::timeout(Duration::from_secs(5), a_leads.wait_for(|l| *l))
            .await
            .expect("a leads within its first renewal")
            .unwrap();
        stop.send(true).unwrap();
        run.await.unwrap();
        assert!(!*a_leads.borrow(), "a stopped leading when it stopped");
        // Resigned, not left to lapse: b leads on its first try, long before a's lease ends.
        let (_stop_b, stopped_b) = watch::channel(false);
        let b = watch::Sender::new(false);
        let mut b_leads = b.subscribe();
        tokio::spawn(leader(&store, "b", b).run(stopped_b));
        tokio::time::timeout(Duration::from_secs(2), b_leads.wait_for(|l| *l))
            .await
            .expect("b leads at once")
            .unwrap();
    }
}
