//! Schedules: every instant of a cron expression becomes a ledger row. The planner loop
//! (`planner`) runs one pass per due schedule (`pass`); operators list, trigger, pause,
//! resume, backfill and register them through the engine's handle (`manage`); schedules
//! registered over the API live in the ledger (`registry`). The decisions themselves are
//! in [`backstop_core::schedule`].

pub mod manage;
mod pass;
pub(crate) mod planner;
mod registry;

pub use manage::{
    BackfillReport, PlanPass, ScheduleActionError, ScheduleView, TickView, Triggered,
};

use crate::context::Context;
use backstop_core::StoreError;
use jiff::Timestamp;

/// The clock schedules are planned against: the database's where it has one, else the
/// engine's.
pub(crate) async fn clock_now(ctx: &Context) -> Result<Timestamp, StoreError> {
    Ok(match ctx.store.database_now().await? {
        Some(t) => t,
        None => ctx.clock.now(),
    })
}
