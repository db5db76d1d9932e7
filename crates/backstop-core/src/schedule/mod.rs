//! Schedules: cron expressions whose every instant becomes a ledger row (a tick), planned
//! without I/O here and written by the engine's planner.
//!
//! | file | what |
//! |---|---|
//! | `cron` | an expression in a time zone → instants, DST included |
//! | `spec` | a schedule as configured, checked |
//! | `tick` | a tick's key and payload |
//! | `plan` | which instants become rows now, and whether each runs |
//! | `watch` | what the reconciler checks: rows of recent instants, late and overrunning ticks, silence |

pub mod cron;
pub mod plan;
pub mod spec;
pub mod tick;
pub mod watch;

pub use cron::{CronError, CronTimes, Instant};
pub use plan::{LastTick, ON_TIME, Plan, PlannedTick, Progress, ROWS_PER_PASS, plan};
pub use spec::{CatchUp, DEFAULT_LATE_AFTER, Overlap, Schedule, ScheduleDef, ScheduleError};
pub use tick::{TickCause, instant_of, manual_key, rfc3339_seconds, tick_key, tick_payload};
