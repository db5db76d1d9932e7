//! `backstop why ID`.

use super::{Ctx, task_id};
use anyhow::{Result, bail};
use backstop_core::Clock;
use backstop_core::pause::{Gate, kind_scope};
use backstop_core::store::{BeatsParams, GetParams, GroupHeadParams, PausesParams, TimelineParams};
use backstop_engine::reconciler::{PassReport, RECONCILER_BEAT};

pub async fn run(ctx: &Ctx, id: &str) -> Result<()> {
    let id = task_id(id)?;
    let store = ctx.store().await?;
    let Some(t) = store.get(GetParams { id }).await? else {
        bail!("no task with id {id}");
    };
    let timeline = store.timeline(TimelineParams { id }).await?;
    let last_pass = store
        .beats(BeatsParams {
            prefix: RECONCILER_BEAT.to_string(),
        })
        .await?
        .into_iter()
        .find(|b| b.name == RECONCILER_BEAT)
        .and_then(|b| PassReport::from_detail(&b.detail));
    let kind = ctx.config.kinds.iter().find(|k| k.name == t.kind);
    // The limit in force for this task's key: an override set at run time, else the kind's.
    let kind = match kind {
        Some(k) => Some(with_override(&*store, k, &t.payload).await?),
        None => None,
    };
    let kind = kind.as_ref();
    let head = match &t.group {
        Some(g) => {
            store
                .group_head(GroupHeadParams {
                    kind: t.kind.clone(),
                    group: g.clone(),
                })
                .await?
        }
        None => None,
    };
    let now = backstop_core::SystemClock.now();
    let scope = kind_scope(&t.kind);
    let pauses: Vec<_> = store
        .pauses(PausesParams::default())
        .await?
        .into_iter()
        .filter(|p| p.scope == scope)
        .collect();
    let gate = Gate::of(&pauses, now);
    for line in backstop_engine::why::explain(
        &t,
        &timeline,
        now,
        kind,
        last_pass.as_ref(),
        head.as_ref(),
        &gate,
    ) {
        println!("{line}");
    }
    Ok(())
}

/// `k` with its concurrency `max` replaced by the override of the key `payload` counts under,
/// if that key has one.
async fn with_override(
    store: &dyn backstop_core::Store,
    k: &backstop_core::KindConfig,
    payload: &[u8],
) -> Result<backstop_core::KindConfig> {
    let mut k = k.clone();
    let Some(limit) = k.concurrency_limit.as_mut() else {
        return Ok(k);
    };
    let value = serde_json::from_slice::<serde_json::Value>(payload).ok();
    let key = backstop_core::limit::key_of(value.as_ref(), &limit.key);
    let overrides = store
        .limit_overrides(backstop_core::store::LimitOverridesParams {
            kind: k.name.clone(),
        })
        .await?;
    if let Some(max) = overrides.iter().find(|o| o.key == key).and_then(|o| o.max) {
        limit.max = max;
    }
    Ok(k)
}
