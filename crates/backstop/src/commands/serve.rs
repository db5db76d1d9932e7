//! `backstop serve`: the engine for the configured kinds until SIGINT/SIGTERM.

use super::Ctx;
use anyhow::Result;

pub async fn run(ctx: &Ctx) -> Result<()> {
    let shutdown = backstop::shutdown_signal();
    let store = ctx.store().await?;
    let engine = ctx.engine(store)?;
    if ctx.config.kinds.is_empty() {
        tracing::warn!("no kinds are configured: only lease rescue will run (see backstop.toml)");
    }
    tracing::info!(database = %ctx.database, config = ?ctx.config.source, "backstop serving");
    engine.run(shutdown).await;
    Ok(())
}
