//! `backstop bridges list`: every bridge of every process on this ledger, as its beat says.

use super::{Ctx, print_json};
use crate::cli::BridgesCommand;
use anyhow::Result;
use backstop_engine::BridgeView;
use std::time::Duration;

pub async fn run(ctx: &Ctx, c: BridgesCommand) -> Result<()> {
    let BridgesCommand::List { json } = c;
    let store = ctx.store().await?;
    let now = jiff::Timestamp::now();
    let views =
        backstop_engine::bridges::from_beats(&*store, now, ctx.config.engine.bridge_beat).await?;
    if json {
        return print_json(&serde_json::json!({
            "bridges": views,
            "configured_not_seen": not_seen(ctx, &views),
        }));
    }
    if views.is_empty() && ctx.config.bridges.is_empty() {
        println!(
            "no bridges: none is configured ([bridges.NAME] in backstop.toml) and none has run on this ledger"
        );
        return Ok(());
    }
    for v in &views {
        println!("{}", line(v, now));
    }
    for name in not_seen(ctx, &views) {
        println!("{name:<16} not running: no process has run this bridge on this ledger yet");
    }
    Ok(())
}

/// Configured bridges that no process has beaten for.
fn not_seen(ctx: &Ctx, views: &[BridgeView]) -> Vec<String> {
    ctx.config
        .bridges
        .iter()
        .filter(|b| !views.iter().any(|v| v.name == b.name))
        .map(|b| b.name.clone())
        .collect()
}

fn line(v: &BridgeView, now: jiff::Timestamp) -> String {
    let state = v.state.as_str();
    let age = Duration::from_secs(now.duration_since(v.seen_at).unsigned_abs().as_secs());
    let seen = match v.stale {
        true => format!(
            " (stale: last seen {} ago)",
            backstop_core::duration::format_duration(age)
        ),
        false => String::new(),
    };
    let error = v
        .last_error
        .as_deref()
        .map(|e| format!("  last error: {e}"))
        .unwrap_or_default();
    format!(
        "{:<16} {state}{seen} connected={} {} → {}{}  received={} inserted={} deduplicated={} rejected={} in_flight={}{}{} on {}{error}",
        v.name,
        v.connected,
        v.source,
        v.kind,
        if v.dead_letters {
            " (dead letters)"
        } else {
            ""
        },
        v.received,
        v.inserted,
        v.deduplicated,
        v.rejected,
        v.in_flight,
        if v.balanced { "" } else { " UNBALANCED" },
        v.ack_pending
            .map(|a| format!(" ack_pending={}/{}", a.pending, a.max))
            .unwrap_or_default(),
        v.worker,
    )
}
