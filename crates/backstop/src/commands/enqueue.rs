//! `backstop enqueue KIND KEY --payload JSON`.

use super::{Ctx, print_json};
use crate::cli::EnqueueArgs;
use anyhow::{Context, Result};
use backstop::EnqueueRequest;
use backstop::view::TaskView;
use backstop_core::store::GetParams;
use std::collections::HashMap;

pub async fn run(ctx: &Ctx, a: EnqueueArgs) -> Result<()> {
    let req = EnqueueRequest {
        kind: a.kind,
        key: a.key,
        payload: a.payload.into_bytes(),
        delay: a.delay,
        expires_in: a.expires_in,
        max_attempts: a.max_attempts,
        group: a.group,
        ..Default::default()
    };
    // Bad input is refused before the database is opened (or created).
    let kinds: HashMap<_, _> = ctx
        .config
        .kinds
        .iter()
        .map(|k| (k.name.clone(), k.clone()))
        .collect();
    backstop_engine::enqueue::prepare(
        &kinds,
        req.clone(),
        jiff::Timestamp::now(),
        ctx.config.engine.max_payload,
    )?;
    let store = ctx.store().await?;
    let engine = ctx.engine(store.clone())?;
    let r = engine.enqueue(req).await?;
    if a.json {
        let t = store
            .get(GetParams { id: r.id })
            .await?
            .context("the task vanished")?;
        let mut v = serde_json::to_value(TaskView::new(&t, None))?;
        v["created"] = r.created.into();
        print_json(&v)
    } else {
        println!("{}", r.id);
        Ok(())
    }
}
