//! `backstop tasks list|show`.

use super::{Ctx, print_json, task_id};
use crate::cli::{ListArgs, TasksCommand};
use anyhow::{Result, bail};
use backstop::view::{TaskView, task_detail, task_line};
use backstop_core::store::ListParams;
use backstop_core::store::{GetParams, TimelineParams};

pub async fn run(ctx: &Ctx, c: TasksCommand) -> Result<()> {
    match c {
        TasksCommand::List(a) => list(ctx, a).await,
        TasksCommand::Show { id, json } => show(ctx, &id, json).await,
    }
}

async fn list(ctx: &Ctx, a: ListArgs) -> Result<()> {
    let store = ctx.store().await?;
    let tasks = store
        .list(ListParams {
            kind: a.kind.clone(),
            status: a.status,
            group: a.group.clone(),
            limit: a.limit as usize,
            ..Default::default()
        })
        .await?;
    if a.json {
        let views: Vec<_> = tasks.iter().map(|t| TaskView::new(t, None)).collect();
        return print_json(&views);
    }
    if tasks.is_empty() {
        println!("{}", nothing_listed("tasks", a.kind.as_deref(), a.status));
    }
    for t in &tasks {
        println!("{}", task_line(t));
    }
    Ok(())
}

/// The line an empty listing prints, naming its filters: silence reads like a hang or a bug.
pub fn nothing_listed(what: &str, kind: Option<&str>, status: Option<backstop::Status>) -> String {
    let mut filters = Vec::new();
    if let Some(k) = kind {
        filters.push(format!("kind {k}"));
    }
    if let Some(s) = status {
        filters.push(format!("status {s}"));
    }
    if filters.is_empty() {
        format!("no {what} in the ledger")
    } else {
        format!("no {what} with {} in the ledger", filters.join(" and "))
    }
}

async fn show(ctx: &Ctx, id: &str, json: bool) -> Result<()> {
    let id = task_id(id)?;
    let store = ctx.store().await?;
    let Some(t) = store.get(GetParams { id }).await? else {
        bail!("no task with id {id}");
    };
    let events = store.timeline(TimelineParams { id }).await?;
    if json {
        print_json(&TaskView::new(&t, Some(&events)))
    } else {
        print!("{}", task_detail(&t, &events));
        Ok(())
    }
}
