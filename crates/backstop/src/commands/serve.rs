//! `backstop serve`: the engine for the configured kinds and the HTTP API, until
//! SIGINT/SIGTERM. Both stop together: the API stops taking requests (long polls answer at
//! once), the engine lets in-flight attempts finish within the grace period.

use super::Ctx;
use crate::cli::ServeArgs;
use anyhow::{Context, Result, anyhow, bail};
use backstop_core::Store;
use backstop_server::AppState;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub async fn run(ctx: &Ctx, args: ServeArgs) -> Result<()> {
    let shutdown = backstop::shutdown_signal();
    let api = &ctx.config.api;
    let listen = args.listen.unwrap_or(api.listen);
    api.check_exposure(listen).map_err(|m| anyhow!(m))?;
    // Before the engine is built: its per-kind metric handles bind to this recorder.
    let metrics = backstop_server::install_recorder();
    let store = ctx.store().await?;
    check_writable(ctx, &*store).await?;
    let engine = ctx.engine(store)?;
    if ctx.config.kinds.is_empty() {
        tracing::warn!("no kinds are configured: only lease rescue will run (see backstop.toml)");
    }
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen} (api.listen / --listen)"))?;
    let addr = listener.local_addr()?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let state = AppState::new(
        engine.clone(),
        api.limits.clone(),
        api.tokens.clone(),
        stop_rx.clone(),
        Some(metrics.clone()),
    );
    let connections = api.connections.clone();
    let app = backstop_server::app(state);
    let until = stopped(stop_rx.clone());
    let server =
        tokio::spawn(
            async move { backstop_server::serve(listener, app, &connections, until).await },
        );
    let upkeep = {
        let rx = stop_rx.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            loop {
                tokio::select! {
                    _ = tick.tick() => metrics.run_upkeep(),
                    _ = stopped(rx.clone()) => return,
                }
            }
        })
    };
    tracing::info!(
        database = %ctx.database,
        config = ?ctx.config.source,
        api = %format!("http://{addr}"),
        auth = if api.tokens.is_empty() { "none (loopback)" } else { "bearer token" },
        sources = ?engine.callback_sources(),
        "backstop serving"
    );
    let signal = async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    let ((), ()) = tokio::join!(engine.run(stopped(stop_rx.clone())), signal);
    match server.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "the API server failed"),
        Err(e) => tracing::error!(error = %e, "the API server panicked"),
    }
    let _ = upkeep.await;
    Ok(())
}

/// How long `serve` waits, at start, for the ledger to take a (rolled-back) write.
const START_WRITE_CHECK: Duration = Duration::from_secs(10);

/// Refuses to serve a ledger that cannot take writes (read-only, full, unreachable): a
/// server on it would answer every write with a 503; failing at start names the cause in one
/// line instead.
async fn check_writable(ctx: &Ctx, store: &dyn Store) -> Result<()> {
    match tokio::time::timeout(START_WRITE_CHECK, store.check_writable()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => bail!(
            "database {}: not serving, the ledger cannot take writes: {}",
            ctx.database,
            e.detail()
        ),
        Err(_) => bail!(
            "database {}: not serving, the ledger did not take a write within {} s",
            ctx.database,
            START_WRITE_CHECK.as_secs()
        ),
    }
}
