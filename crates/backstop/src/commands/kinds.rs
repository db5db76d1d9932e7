//! `backstop kinds pause|resume|show KIND`.

use super::{Ctx, print_json};
use crate::cli::KindsCommand;
use anyhow::Result;
use backstop_engine::{KindPauseError, KindPauseView};

pub async fn run(ctx: &Ctx, c: KindsCommand) -> Result<()> {
    let engine = ctx.engine(ctx.store().await?)?;
    let refused = |e: KindPauseError| -> anyhow::Error {
        match e {
            KindPauseError::Store(e) => e.into(),
            e => anyhow::anyhow!("{e}"),
        }
    };
    match c {
        KindsCommand::Pause { kind, reason } => {
            let v = engine
                .pause_kind(&kind, &reason, "cli")
                .await
                .map_err(refused)?;
            println!("{}: paused ({})", v.kind, v.reason.unwrap_or_default());
        }
        KindsCommand::Resume { kind, reason } => {
            let v = engine
                .resume_kind(&kind, reason.as_deref().unwrap_or(""), "cli")
                .await
                .map_err(refused)?;
            println!("{}: {}", v.kind, v.state);
        }
        KindsCommand::Show { kind, json } => {
            let v = engine.kind_pause(&kind).await.map_err(refused)?;
            if json {
                return print_json(&v);
            }
            print_view(&v);
        }
    }
    Ok(())
}

fn print_view(v: &KindPauseView) {
    let t = backstop_core::wire_time::format;
    let mut line = format!("{}: {}", v.kind, v.state);
    if let (Some(cause), Some(reason)) = (v.cause, &v.reason) {
        line.push_str(&format!(" ({cause}: {reason}"));
        if let Some(by) = &v.by {
            line.push_str(&format!("; by {by}"));
        }
        if let Some(u) = v.until {
            line.push_str(&format!("; until {}", t(u)));
        }
        line.push(')');
    }
    println!("{line}");
    for h in &v.history {
        println!(
            "  {}  {} {}  by {}: {}",
            t(h.at),
            h.action,
            h.cause,
            h.by,
            h.reason
        );
    }
}
