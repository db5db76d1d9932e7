//! Schedules: every instant of a cron expression becomes a ledger row. The planner loop
//! (`planner`) runs one pass per due schedule (`pass`); operators list, trigger, pause,
//! resume, backfill and register them through the engine's handle (`manage`); schedules
//! registered over the API live in the ledger (`registry`); the leader's reconciler checks
//! them each pass (`check`, with each schedule's range kept in `ranges` and its rows read in
//! `ticks`), reporting a [`ScheduleCheck`] (`report`). The decisions themselves are in
//! [`backstop_core::schedule`].

pub(crate) mod check;
mod clock;
pub mod manage;
mod pass;
pub(crate) mod planner;
mod ranges;
mod registry;
pub mod report;
mod ticks;

pub use check::PASS_CAP;
pub use manage::{
    BackfillReport, PlanPass, ScheduleActionError, ScheduleView, TickView, Triggered,
};
pub use report::{ScheduleCheck, ScheduleVerdict};
