//! `backstop dead list|retry|resolve`: the dead letters.

use super::{Ctx, print_json, task_id};
use crate::cli::DeadCommand;
use anyhow::{Result, bail};
use backstop::view::{TaskView, task_line};
use backstop::{ManualRequest, Status};
use backstop_core::store::ListParams;

/// Who the timeline says asked, for actions taken from the command line.
fn actor() -> String {
    match std::env::var("USER") {
        Ok(u) if !u.is_empty() => format!("cli:{u}"),
        _ => "cli".into(),
    }
}

pub async fn run(ctx: &Ctx, c: DeadCommand) -> Result<()> {
    match c {
        DeadCommand::List { kind, limit, json } => {
            let store = ctx.store().await?;
            let tasks = store
                .list(ListParams {
                    kind: kind.clone(),
                    status: Some(Status::Failed),
                    limit: limit as usize,
                    ..Default::default()
                })
                .await?;
            if json {
                let views: Vec<_> = tasks.iter().map(|t| TaskView::new(t, None)).collect();
                return print_json(&views);
            }
            if tasks.is_empty() {
                let none = super::tasks::nothing_listed("dead letters", kind.as_deref(), None);
                println!("{none}");
            }
            for t in &tasks {
                println!("{}", task_line(t));
            }
            Ok(())
        }
        DeadCommand::Retry { ids } => {
            // Every id must parse before anything changes.
            let ids = ids.iter().map(|s| task_id(s)).collect::<Result<Vec<_>>>()?;
            let engine = ctx.engine(ctx.store().await?)?;
            let mut failures = Vec::new();
            for id in ids {
                let r = engine
                    .retry(ManualRequest {
                        id,
                        actor: actor(),
                        reason: None,
                    })
                    .await;
                match r {
                    Ok(t) => println!(
                        "{}  retried: pending again, {} more attempts",
                        t.id,
                        t.max_attempts - t.attempts
                    ),
                    Err(e) => failures.push(e.to_string()),
                }
            }
            if !failures.is_empty() {
                bail!("{}", failures.join("; "));
            }
            Ok(())
        }
        DeadCommand::Resolve { id, reason } => {
            let id = task_id(&id)?;
            if reason.trim().is_empty() {
                bail!("--reason must say why the task is resolved");
            }
            let engine = ctx.engine(ctx.store().await?)?;
            let t = engine
                .resolve(ManualRequest {
                    id,
                    actor: actor(),
                    reason: Some(reason),
                })
                .await?;
            println!("{}  resolved: {}", t.id, t.status);
            Ok(())
        }
    }
}
