//! The clock schedules are planned against.

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
