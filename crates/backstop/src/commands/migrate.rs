//! `backstop migrate`: apply the schema; safe to repeat.

use super::Ctx;
use anyhow::{Context, Result};

pub async fn run(ctx: &Ctx) -> Result<()> {
    let store = backstop::connect_store(&ctx.database)
        .await
        .with_context(|| format!("database {}", ctx.database))?;
    store.migrate().await?;
    println!("{}: schema is up to date", ctx.database);
    Ok(())
}
