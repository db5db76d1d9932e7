//! `backstop tasks list|show`.

use super::{Ctx, print_json, task_id};
use crate::cli::{ListArgs, TasksCommand};
use anyhow::{Result, bail};
use backstop::view::{TaskView, task_detail, task_line};
use backstop_core::store::ListParams;

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
            kind: a.kind,
            status: a.status,
            limit: a.limit as usize,
            ..Default::default()
        })
        .await?;
    if a.json {
        let views: Vec<_> = tasks.iter().map(|t| TaskView::new(t, None)).collect();
        return print_json(&views);
    }
    for t in &tasks {
        println!("{}", task_line(t));
    }
    Ok(())
}

async fn show(ctx: &Ctx, id: &str, json: bool) -> Result<()> {
    let id = task_id(id)?;
    let store = ctx.store().await?;
    let Some(t) = store.get(id).await? else {
        bail!("no task with id {id}");
    };
    let events = store.timeline(id).await?;
    if json {
        print_json(&TaskView::new(&t, Some(&events)))
    } else {
        print!("{}", task_detail(&t, &events));
        Ok(())
    }
}
