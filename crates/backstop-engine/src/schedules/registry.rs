//! Schedules registered over the API: their definitions live in the ledger (so every process
//! plans them), checked against the configured kinds when read.

use crate::context::{Context, Kinds};
use backstop_core::StoreError;
use backstop_core::schedule::{Schedule, ScheduleDef};
use backstop_core::store::{ScheduleRecord, SchedulesParams};

/// The registered schedules that are usable now. One whose definition no longer checks (its
/// kind was removed from the configuration) is left out, with a warning.
pub(crate) async fn registered(ctx: &Context) -> Result<Vec<Schedule>, StoreError> {
    let records = ctx.store.schedules(SchedulesParams::default()).await?;
    let mut out = Vec::new();
    for (name, s) in definitions(&records, &ctx.kinds) {
        match s {
            Ok(s) => out.push(s),
            Err(e) => {
                tracing::warn!(schedule = %name, error = %e, "schedules: a registered schedule is not usable; not planned")
            }
        }
    }
    Ok(out)
}

/// The registered schedules among stored `records`, each checked against the configured
/// kinds (the planner warns about those that do not check; the reconciler skips them).
pub(crate) fn definitions<'a>(
    records: &'a [ScheduleRecord],
    kinds: &'a Kinds,
) -> impl Iterator<Item = (&'a str, Result<Schedule, String>)> + 'a {
    records.iter().filter_map(move |r| {
        let text = r.definition.as_deref()?;
        Some((r.name.as_str(), parse(kinds, &r.name, text)))
    })
}

/// Checks a definition (JSON) of schedule `name` against the configured kinds.
fn parse(kinds: &Kinds, name: &str, json: &str) -> Result<Schedule, String> {
    let def: ScheduleDef = serde_json::from_str(json).map_err(|e| e.to_string())?;
    def.build(name, |k| kinds.get(k).is_some())
        .map_err(|e| e.to_string())
}

/// Checks a definition of schedule `name` against the configured kinds.
pub(crate) fn check(
    ctx: &Context,
    name: &str,
    def: ScheduleDef,
) -> Result<Schedule, backstop_core::schedule::ScheduleError> {
    def.build(name, |k| ctx.kinds.get(k).is_some())
}
