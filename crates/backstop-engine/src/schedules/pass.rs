//! One planning pass over one schedule, by hand (`Engine::plan_schedule`, which the bench
//! times): a batch of one ([`super::batch`]). The planner loop plans the schedules due at one
//! instant as one batch.

use super::batch::pass_batch;
use super::clock::planning_clock;
use super::outcome::PassReport;
use backstop_core::StoreError;
use backstop_core::schedule::Schedule;

/// A tick's task (the operators' trigger and backfill write ticks too).
pub(crate) use super::tick_task::new_tick;

/// Plans `s` up to now (the database's clock, where it has one).
pub(crate) async fn pass(
    ctx: &crate::context::Context,
    s: &Schedule,
) -> Result<PassReport, StoreError> {
    let clock = planning_clock(ctx).await?;
    let mut one = pass_batch(ctx, &[s], clock).await;
    one.pop().unwrap_or_else(|| {
        Err(StoreError::Database(
            "a batch of one answered nothing".into(),
        ))
    })
}
