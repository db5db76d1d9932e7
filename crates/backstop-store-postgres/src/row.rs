//! Conversions between rows and domain values.

use crate::types::{Id, Time};
use backstop_core::{Status, StoreError, Task};
use jiff::Timestamp;
use sqlx::postgres::{PgRow, Postgres};
use sqlx::{Decode, Row, Type};

/// One column of a row, with a decoding failure as a store error.
pub(crate) fn col<'r, T>(r: &'r PgRow, name: &str) -> Result<T, StoreError>
where
    T: Decode<'r, Postgres> + Type<Postgres>,
{
    r.try_get(name)
        .map_err(|e| StoreError::Database(format!("column {name}: {e}").into()))
}

/// A time column.
pub(crate) fn time(r: &PgRow, name: &str) -> Result<Timestamp, StoreError> {
    Ok(col::<Time>(r, name)?.0)
}

/// A nullable time column.
pub(crate) fn opt_time(r: &PgRow, name: &str) -> Result<Option<Timestamp>, StoreError> {
    Ok(col::<Option<Time>>(r, name)?.map(|t| t.0))
}

/// A count column (attempts, limits) as the domain's `u32`.
pub(crate) fn count(r: &PgRow, name: &str) -> Result<u32, StoreError> {
    let n: i64 = col(r, name)?;
    u32::try_from(n)
        .map_err(|_| StoreError::Database(format!("{name} = {n} is out of range").into()))
}

/// A status column.
pub(crate) fn status(r: &PgRow, name: &str) -> Result<Status, StoreError> {
    let s: &str = col(r, name)?;
    s.parse()
        .map_err(|e| StoreError::Database(format!("in the database: {e}").into()))
}

/// Whole milliseconds from `start` to `end`, each first cut to the millisecond (as the SQLite
/// store counts them); never negative.
pub(crate) fn duration_ms(start: Timestamp, end: Timestamp) -> i64 {
    (end.as_millisecond() - start.as_millisecond()).max(0)
}

/// The columns [`task`] reads, as a literal so that statements stay constants. A parked task
/// shows its own `run_at`, not the far future its row holds while parked (see 0013_groups).
macro_rules! task_columns {
    () => {
        "id, kind, key, payload, status, attempts, max_attempts, \
         coalesce(parked_run_at, run_at) AS run_at, expires_at, lease_owner, lease_until, epoch, \
         traceparent, last_error, reason, created_at, updated_at, grp, grp_seq, \
         parked_run_at IS NOT NULL AS parked"
    };
}
pub(crate) use task_columns;

/// A task from a row holding [`task_columns!`].
pub(crate) fn task(r: &PgRow) -> Result<Task, StoreError> {
    Ok(Task {
        id: col::<Id>(r, "id")?.0,
        kind: col(r, "kind")?,
        key: col(r, "key")?,
        payload: col(r, "payload")?,
        status: status(r, "status")?,
        attempts: count(r, "attempts")?,
        max_attempts: count(r, "max_attempts")?,
        run_at: time(r, "run_at")?,
        expires_at: opt_time(r, "expires_at")?,
        lease_owner: col(r, "lease_owner")?,
        lease_until: opt_time(r, "lease_until")?,
        epoch: col(r, "epoch")?,
        traceparent: col(r, "traceparent")?,
        last_error: col(r, "last_error")?,
        reason: col(r, "reason")?,
        created_at: time(r, "created_at")?,
        updated_at: time(r, "updated_at")?,
        group: col(r, "grp")?,
        group_seq: col(r, "grp_seq")?,
        parked: col(r, "parked")?,
    })
}
