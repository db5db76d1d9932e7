//! The clock schedules are planned against.

use crate::context::Context;
use backstop_core::{Clock, StoreError};
use jiff::Timestamp;
use std::sync::Arc;
use std::time::Instant;

/// The clock a batch plans against, read again as the batch goes on, so that each chunk's
/// rows' `created_at` says when they were written.
#[derive(Clone)]
pub(crate) enum Moving {
    /// One reading of the database's clock (`at`, taken at `since`), moved on by the time since:
    /// one query per batch, not per chunk.
    Database { at: Timestamp, since: Instant },
    /// The engine's own clock (a store without one), read each time: rows are due by the clock
    /// that claims them, a manual clock included.
    Engine(Arc<dyn Clock>),
}

impl Moving {
    /// Now, by that clock.
    pub(crate) fn now(&self) -> Timestamp {
        match self {
            Moving::Database { at, since } => *at + since.elapsed(),
            Moving::Engine(clock) => clock.now(),
        }
    }
}

/// The clock to plan against: the database's where it has one, else the engine's.
pub(crate) async fn planning_clock(ctx: &Context) -> Result<Moving, StoreError> {
    Ok(match ctx.store.database_now().await? {
        Some(at) => Moving::Database {
            at,
            since: Instant::now(),
        },
        None => Moving::Engine(ctx.clock.clone()),
    })
}

/// The clock schedules are planned against: the database's where it has one, else the
/// engine's.
pub(crate) async fn clock_now(ctx: &Context) -> Result<Timestamp, StoreError> {
    Ok(match ctx.store.database_now().await? {
        Some(t) => t,
        None => ctx.clock.now(),
    })
}
