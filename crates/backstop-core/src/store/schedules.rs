//! Schedules' stored progress: how far each schedule is planned, its outage being caught up,
//! its last tick, a `queue_one` instant waiting, a pause by hand, counters, and a definition
//! registered over the API. The ticks themselves are ordinary tasks (see
//! [`crate::schedule`]).

use super::{BoxFuture, StoreError};
use crate::schedule::Progress;
use jiff::Timestamp;

/// One schedule's stored row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduleRecord {
    /// The schedule's name.
    pub name: String,
    /// The planner's progress (`paused` is the pause by hand).
    pub progress: Progress,
    /// Instants compensated as missed, ever.
    pub missed: u64,
    /// Instants compensated as overlapping, ever.
    pub overlapped: u64,
    /// A definition registered over the API (`ScheduleDef` as JSON); `None` for one that
    /// lives in the configuration file.
    pub definition: Option<String>,
    /// Who paused it and why, when paused by hand.
    pub paused_note: Option<String>,
    /// Last written.
    pub updated_at: Timestamp,
}

/// Reads stored schedules.
#[derive(Clone, Debug, Default)]
pub struct SchedulesParams {
    /// Only these names; all when `None`.
    pub names: Option<Vec<String>>,
}

/// Stores a planner pass's progress, fenced: written only when the stored `planned_until`
/// is still `expected` (`None`: no row yet, which this creates). A planner that lost the race
/// to another leaves the other's progress alone.
#[derive(Clone, Debug)]
pub struct AdvanceScheduleParams {
    /// The schedule.
    pub name: String,
    /// The `planned_until` the pass started from.
    pub expected: Option<Timestamp>,
    /// The new progress. Its `paused` is ignored: pausing is [`PauseScheduleParams`].
    pub progress: Progress,
    /// Added to the missed counter.
    pub add_missed: u64,
    /// Added to the overlapped counter.
    pub add_overlapped: u64,
    /// When written.
    pub now: Timestamp,
}

/// Pauses or resumes a schedule by hand (creating its row if needed).
#[derive(Clone, Debug)]
pub struct PauseScheduleParams {
    /// The schedule.
    pub name: String,
    /// Paused (`true`) or resumed.
    pub paused: bool,
    /// Who and why (kept while paused, cleared on resume).
    pub note: Option<String>,
    /// When.
    pub now: Timestamp,
}

/// Registers, replaces or removes (`definition: None`) a schedule defined over the API.
/// Removing keeps the row's progress and counters (its ticks stay in the ledger).
#[derive(Clone, Debug)]
pub struct DefineScheduleParams {
    /// The schedule.
    pub name: String,
    /// Its `ScheduleDef` as JSON; `None` removes it.
    pub definition: Option<String>,
    /// When.
    pub now: Timestamp,
}

/// The store's part in schedules.
pub trait Schedules: Send + Sync {
    /// Stored schedules, by name.
    fn schedules(
        &self,
        p: SchedulesParams,
    ) -> BoxFuture<'_, Result<Vec<ScheduleRecord>, StoreError>>;

    /// Stores a planner pass's progress if nobody else moved it since (see
    /// [`AdvanceScheduleParams`]). `true` when written. A batch of one.
    fn advance_schedule(
        &self,
        p: AdvanceScheduleParams,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let written = self.advance_schedules(vec![p]).await?;
            Ok(written.first().copied().unwrap_or(false))
        })
    }

    /// Stores the progress of many passes at once (the planner's batch of the schedules due
    /// at one instant), each item fenced by its own `expected`, created when that is `None`.
    /// One `bool` per item, in order, `true` where written; items are applied in order, as
    /// one by one, and all in one transaction (nothing is written when it fails).
    fn advance_schedules(
        &self,
        items: Vec<AdvanceScheduleParams>,
    ) -> BoxFuture<'_, Result<Vec<bool>, StoreError>>;

    /// Pauses or resumes by hand.
    fn pause_schedule(
        &self,
        p: PauseScheduleParams,
    ) -> BoxFuture<'_, Result<ScheduleRecord, StoreError>>;

    /// Registers or removes an API-defined schedule.
    fn define_schedule(
        &self,
        p: DefineScheduleParams,
    ) -> BoxFuture<'_, Result<ScheduleRecord, StoreError>>;

    /// The database's clock, which every planner on it plans against (so a process with a
    /// fast clock creates nothing early). `None` from a store without a clock of its own
    /// (the embedded SQLite store, whose one process's clock is the only one): the caller
    /// then uses its own [`Clock`](crate::Clock), which tests can drive.
    fn database_now(&self) -> BoxFuture<'_, Result<Option<Timestamp>, StoreError>>;
}
