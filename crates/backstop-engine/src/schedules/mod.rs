//! Schedules: every instant of a cron expression becomes a ledger row. The planner loop
//! (`planner`) runs one pass per due schedule (`pass`); operators list, trigger, pause,
//! resume, backfill and register them through the engine's handle (`manage`); schedules
//! registered over the API live in the ledger (`registry`). The decisions themselves are
//! in [`backstop_core::schedule`].

mod clock;
pub mod manage;
mod pass;
pub(crate) mod planner;
mod registry;

pub use manage::{
    BackfillReport, PlanPass, ScheduleActionError, ScheduleView, TickView, Triggered,
};
