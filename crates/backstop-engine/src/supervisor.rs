//! The run supervisor: starts every loop with exactly the handles it uses, and on shutdown
//! stops them in order — no new claims, in-flight attempts finish within the grace period,
//! their outcomes are written, the rest released, then the background duties stop.

use crate::alerts::Alerter;
use crate::bridges::{Bridge, BridgeTiming};
use crate::completer::Completer;
use crate::context::Delivery;
use crate::dispatcher::Dispatcher;
use crate::engine::Engine;
use crate::heartbeat;
use crate::leader::Leader;
use crate::pauses::watch::PauseWatch;
use crate::reconciler::Reconciler;
use crate::reconciler::nodes::Nodes;
use crate::retention;
use crate::schedules::planner::Planner;
use crate::wakeups;
use backstop_core::store::ReleaseParams;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

impl Engine {
    /// Runs until `shutdown` resolves (call it once per engine), then stops claiming, lets
    /// in-flight attempts finish within the grace period, writes their outcomes and releases
    /// the rest.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        let (ctx, parts) = (&self.ctx, &self.parts);
        let opts = &parts.opts;
        let (stop_tx, stop_rx) = watch::channel(false);
        let (done_tx, done_rx) = mpsc::channel(opts.complete_batch * 8);
        let completer = tokio::spawn(Completer::new(ctx, opts).run(done_rx, stop_rx.clone()));
        let min_lease = ctx
            .kinds
            .configs()
            .values()
            .map(|k| k.lease)
            .min()
            .unwrap_or(Duration::from_secs(60));
        let heartbeat = tokio::spawn(heartbeat::run(
            ctx.store.clone(),
            ctx.clock.clone(),
            parts.inflight.clone(),
            ctx.owner.to_string(),
            (min_lease / 6).max(Duration::from_millis(100)),
            stop_rx.clone(),
        ));
        let leader = Leader::new(ctx, opts, parts.leading.clone());
        let leader = tokio::spawn(leader.run(stop_rx.clone()));
        let reconciler = Reconciler::new(ctx, opts, parts.leading.subscribe());
        let reconciler = tokio::spawn(reconciler.run(stop_rx.clone()));
        let nodes = Nodes::new(ctx, opts, parts.leading.subscribe(), parts.started);
        let nodes = tokio::spawn(nodes.run(stop_rx.clone()));
        let planner = Planner::new(ctx.clone(), parts.schedules.clone());
        let planner = tokio::spawn(planner.run(stop_rx.clone()));
        let alerter = Alerter::new(ctx.clone(), parts.alert_opts.clone(), opts);
        let alerter = tokio::spawn(alerter.run(stop_rx.clone()));
        let pruner = tokio::spawn(retention::run(
            ctx.store.clone(),
            ctx.clock.clone(),
            opts.retention.clone(),
            opts.retention_interval,
            parts.leading.subscribe(),
            stop_rx.clone(),
        ));
        let pause_watch = PauseWatch {
            store: ctx.store.clone(),
            clock: ctx.clock.clone(),
            kinds: ctx.kinds.clone(),
            every: opts.pause_watch,
        };
        // The gates are set before any dispatcher claims: a kind paused before this process
        // started claims nothing.
        pause_watch.once().await;
        let pause_watch = tokio::spawn(pause_watch.run(stop_rx.clone()));
        let timing = BridgeTiming {
            beat: opts.bridge_beat,
            down_alert: opts.bridge_down_alert,
            max_pause: Duration::from_secs(5),
            max_payload: opts.max_payload,
            ack_delay: opts.bridge_ack_delay,
        };
        let bridges: Vec<_> = parts
            .bridges
            .iter()
            .map(|(config, status)| {
                let b = Bridge::new(ctx.clone(), config.clone(), status.clone(), timing.clone());
                tokio::spawn(b.run(stop_rx.clone()))
            })
            .collect();
        let mut dispatchers = Vec::new();
        for kind in ctx.kinds.delivered_by(Delivery::Dispatched) {
            if kind.config.paused {
                continue;
            }
            let executor = parts.executors[&kind.config.name].clone();
            let d = Dispatcher::new(
                ctx,
                opts,
                parts.inflight.clone(),
                kind.clone(),
                executor,
                done_tx.clone(),
                stop_rx.clone(),
            );
            dispatchers.push(tokio::spawn(d.run(stop_rx.clone())));
        }
        drop(done_tx);
        let wakeups = wakeups::spawn(&*ctx.store, Arc::downgrade(&ctx.kinds));
        tracing::info!(
            worker = %ctx.owner,
            push_or_in_process = ctx.kinds.delivered_by(Delivery::Dispatched).count(),
            pull = ctx.kinds.delivered_by(Delivery::Pulled).count(),
            "engine started"
        );

        shutdown.await;
        tracing::info!(
            in_flight = parts.inflight.len(),
            "shutting down: no new claims"
        );
        let _ = stop_tx.send(true);
        // Bridges first: a batch being written finishes and is acknowledged; the rest stays
        // with the broker.
        for b in bridges {
            let _ = b.await;
        }
        for d in dispatchers {
            let _ = d.await;
        }
        if let Some(w) = wakeups {
            w.abort();
        }
        let deadline = Instant::now() + opts.grace;
        while parts.inflight.len() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let unfinished = parts.inflight.abort_all();
        // Every finished attempt's sender is gone now; the completer drains and stops.
        let _ = completer.await;
        if !unfinished.is_empty() {
            let now = ctx.clock.now();
            match ctx
                .store
                .release(ReleaseParams {
                    leases: unfinished.clone(),
                    worker: ctx.owner.to_string(),
                    now,
                })
                .await
            {
                Ok(n) => tracing::warn!(
                    released = n,
                    "grace period over: released unfinished attempts"
                ),
                Err(e) => {
                    tracing::error!(error = %e, "releasing leases failed; they will be rescued when they expire")
                }
            }
        }
        let _ = heartbeat.await;
        let _ = reconciler.await;
        let _ = planner.await;
        let _ = nodes.await;
        let _ = alerter.await;
        let _ = pruner.await;
        let _ = pause_watch.await;
        let _ = leader.await;
        tracing::info!("engine stopped");
    }
}
