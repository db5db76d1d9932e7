//! Schedules registered over the API: their definitions live in the ledger (so every process
//! plans them), checked against the configured kinds when read.

use crate::context::Context;
use backstop_core::StoreError;
use backstop_core::schedule::{Schedule, ScheduleDef};
use backstop_core::store::SchedulesParams;

/// The registered schedules that are usable now. One whose definition no longer checks (its
/// kind was removed from the configuration) is left out, with a warning.
pub(crate) async fn registered(ctx: &Context) -> Result<Vec<Schedule>, StoreError> {
    let records = ctx.store.schedules(SchedulesParams::default()).await?;
    let mut out = Vec::new();
    for r in records {
        let Some(text) = r.definition else {
            continue;
        };
        match parse(ctx, &r.name, &text) {
            Ok(s) => out.push(s),
            Err(e) => {
                tracing::warn!(schedule = %r.name, error = %e, "schedules: a registered schedule is not usable; not planned")
            }
        }
    }
    Ok(out)
}

/// Checks a definition (JSON) of schedule `name` against the configured kinds.
pub(crate) fn parse(ctx: &Context, name: &str, json: &str) -> Result<Schedule, String> {
    let def: ScheduleDef = serde_json::from_str(json).map_err(|e| e.to_string())?;
    check(ctx, name, def).map_err(|e| e.to_string())
}

/// Checks a definition of schedule `name` against the configured kinds.
pub(crate) fn check(
    ctx: &Context,
    name: &str,
    def: ScheduleDef,
) -> Result<Schedule, backstop_core::schedule::ScheduleError> {
    def.build(name, |k| ctx.kinds.get(k).is_some())
}
