//! Schedules: every instant of a cron expression becomes a ledger row. The planner loop
//! (`planner`) plans the schedules due at one instant as one batch (`batch`: their last
//! ticks read in `last_ticks`, each pass's result in `outcome`, its rows' tasks in
//! `tick_task`), and a pass by hand is a batch of one (`pass`); operators list, trigger, pause,
//! resume, backfill and register them through the engine's handle (`manage`); schedules
//! registered over the API live in the ledger (`registry`); the leader's reconciler checks
//! them each pass (`check`, with each schedule's range kept in `ranges` and its rows read in
//! `ticks`), reporting a [`ScheduleCheck`] (`report`). The decisions themselves are in
//! [`backstop_core::schedule`].

mod batch;
pub(crate) mod check;
mod clock;
mod last_ticks;
pub mod manage;
mod outcome;
mod pass;
pub(crate) mod planner;
mod ranges;
mod registry;
pub mod report;
mod tick_task;
mod ticks;

pub use check::PASS_CAP;
pub use manage::{
    BackfillReport, PlanPass, ScheduleActionError, ScheduleView, TickView, Triggered,
};
pub use report::{ScheduleCheck, ScheduleVerdict};
