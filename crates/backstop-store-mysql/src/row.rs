//! Conversions between rows and domain values.

use backstop_core::{Status, StoreError, Task, TaskId};
use jiff::Timestamp;
use sqlx::mysql::MySqlRow;
use sqlx::{ColumnIndex, Decode, MySql, Row, Type};

/// Milliseconds since the epoch, the storage form of every time.
pub(crate) fn to_ms(t: Timestamp) -> i64 {
    t.as_millisecond()
}

pub(crate) fn from_ms(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::MAX)
}

/// The storage form of a task id: its 16 bytes (`BINARY(16)`), which sort like the id.
pub(crate) fn id_bytes(id: &TaskId) -> &[u8] {
    id.0.as_bytes()
}

pub(crate) fn parse_id(b: &[u8]) -> Result<TaskId, StoreError> {
    uuid::Uuid::from_slice(b).map(TaskId).map_err(|e| {
        StoreError::Database(format!("bad task id {b:02x?} in the database: {e}").into())
    })
}

/// The storage form of a status (see the `status` column in the migration).
pub(crate) fn status_code(s: Status) -> i8 {
    match s {
        Status::Pending => 0,
        Status::Running => 1,
        Status::Succeeded => 2,
        Status::Failed => 3,
        Status::Compensated => 4,
    }
}

pub(crate) fn parse_status(code: i64) -> Result<Status, StoreError> {
    Status::ALL
        .into_iter()
        .find(|s| i64::from(status_code(*s)) == code)
        .ok_or_else(|| StoreError::Database(format!("bad status {code} in the database").into()))
}

/// One column, or a [`StoreError`] naming it.
pub(crate) fn col<'r, T, I>(r: &'r MySqlRow, i: I) -> Result<T, StoreError>
where
    T: Decode<'r, MySql> + Type<MySql>,
    I: ColumnIndex<MySqlRow> + std::fmt::Debug + Copy,
{
    r.try_get(i)
        .map_err(|e| StoreError::Database(format!("column {i:?}: {e}").into()))
}

/// A `VARBINARY` text column (`kind`, `key`): stored as bytes so that it compares byte for
/// byte, read back as the UTF-8 it was written as.
pub(crate) fn text<I>(r: &MySqlRow, i: I) -> Result<String, StoreError>
where
    I: ColumnIndex<MySqlRow> + std::fmt::Debug + Copy,
{
    String::from_utf8(col::<Vec<u8>, I>(r, i)?)
        .map_err(|e| StoreError::Database(format!("column {i:?} is not UTF-8: {e}").into()))
}

/// An optional `VARBINARY` text column (`grp`).
pub(crate) fn opt_text(r: &MySqlRow, name: &str) -> Result<Option<String>, StoreError> {
    col::<Option<Vec<u8>>, _>(r, name)?
        .map(|b| {
            String::from_utf8(b).map_err(|e| {
                StoreError::Database(format!("column {name:?} is not UTF-8: {e}").into())
            })
        })
        .transpose()
}

/// An optional time column.
pub(crate) fn opt_time(r: &MySqlRow, name: &str) -> Result<Option<Timestamp>, StoreError> {
    Ok(col::<Option<i64>, _>(r, name)?.map(from_ms))
}

/// The columns [`task`] reads. A parked task's `run_at` is its own, kept aside while the row's
/// holds the parked instant.
pub(crate) const TASK_COLUMNS: &str = "id, kind, `key`, payload, status, attempts, max_attempts, \
     COALESCE(parked_run_at, run_at) AS run_at, expires_at, lease_owner, lease_until, epoch, \
     traceparent, last_error, reason, created_at, updated_at, grp, grp_seq, \
     parked_run_at IS NOT NULL AS parked";

pub(crate) fn task(r: &MySqlRow) -> Result<Task, StoreError> {
    Ok(Task {
        id: parse_id(&col::<Vec<u8>, _>(r, "id")?)?,
        kind: text(r, "kind")?,
        key: text(r, "key")?,
        payload: col(r, "payload")?,
        status: parse_status(col(r, "status")?)?,
        attempts: col::<i64, _>(r, "attempts")? as u32,
        max_attempts: col::<i64, _>(r, "max_attempts")? as u32,
        run_at: from_ms(col(r, "run_at")?),
        expires_at: opt_time(r, "expires_at")?,
        lease_owner: col(r, "lease_owner")?,
        lease_until: opt_time(r, "lease_until")?,
        epoch: col(r, "epoch")?,
        traceparent: col(r, "traceparent")?,
        last_error: col(r, "last_error")?,
        reason: col(r, "reason")?,
        created_at: from_ms(col(r, "created_at")?),
        updated_at: from_ms(col(r, "updated_at")?),
        group: opt_text(r, "grp")?,
        group_seq: col(r, "grp_seq")?,
        parked: col::<i64, _>(r, "parked")? != 0,
    })
}
