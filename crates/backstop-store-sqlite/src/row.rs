//! Conversions between rows and domain values.

use backstop_core::{Status, StoreError, Task, TaskId};
use jiff_ms::*;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

/// Milliseconds since the epoch, the storage form of every time.
pub(crate) mod jiff_ms {
    use jiff::Timestamp;

    pub(crate) fn to_ms(t: Timestamp) -> i64 {
        t.as_millisecond()
    }

    pub(crate) fn from_ms(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(ms).unwrap_or(Timestamp::MAX)
    }
}

/// The storage form of a task id: its 16 bytes, which sort like the id (by creation time).
pub(crate) fn id_bytes(id: &TaskId) -> &[u8] {
    id.0.as_bytes()
}

pub(crate) fn parse_id(b: &[u8]) -> Result<TaskId, StoreError> {
    uuid::Uuid::from_slice(b).map(TaskId).map_err(|e| {
        StoreError::Database(format!("bad task id {b:02x?} in the database: {e}").into())
    })
}

/// The storage form of a status (see the `status` column in the migration).
pub(crate) fn status_code(s: Status) -> i64 {
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
        .find(|s| status_code(*s) == code)
        .ok_or_else(|| StoreError::Database(format!("bad status {code} in the database").into()))
}

/// The columns [`task`] reads, as a literal so queries stay `&'static str`.
macro_rules! task_columns {
    () => {
        "id, kind, key, payload, status, attempts, max_attempts, \
         coalesce(parked_run_at, run_at) AS run_at, expires_at, lease_owner, lease_until, \
         epoch, traceparent, last_error, reason, created_at, updated_at, grp, grp_seq, \
         parked_run_at IS NOT NULL AS parked"
    };
}
pub(crate) use task_columns;

pub(crate) fn task(r: &SqliteRow) -> Result<Task, StoreError> {
    Ok(Task {
        id: parse_id(r.get("id"))?,
        kind: r.get("kind"),
        key: r.get("key"),
        payload: r.get("payload"),
        status: parse_status(r.get("status"))?,
        attempts: r.get::<i64, _>("attempts") as u32,
        max_attempts: r.get::<i64, _>("max_attempts") as u32,
        run_at: from_ms(r.get("run_at")),
        expires_at: r.get::<Option<i64>, _>("expires_at").map(from_ms),
        lease_owner: r.get("lease_owner"),
        lease_until: r.get::<Option<i64>, _>("lease_until").map(from_ms),
        epoch: r.get("epoch"),
        traceparent: r.get("traceparent"),
        last_error: r.get("last_error"),
        reason: r.get("reason"),
        created_at: from_ms(r.get("created_at")),
        updated_at: from_ms(r.get("updated_at")),
        group: r.get("grp"),
        group_seq: r.get("grp_seq"),
        parked: r.get("parked"),
    })
}

/// A task from a raw row holding [`task_columns!`], in that order.
pub(crate) fn raw_task(r: &crate::raw::Row<'_>) -> Result<Task, StoreError> {
    Ok(Task {
        id: parse_id(r.blob(0))?,
        kind: r.text(1)?.to_owned(),
        key: r.text(2)?.to_owned(),
        payload: r.blob(3).to_vec(),
        status: parse_status(r.int(4))?,
        attempts: r.int(5) as u32,
        max_attempts: r.int(6) as u32,
        run_at: from_ms(r.int(7)),
        expires_at: r.opt_int(8).map(from_ms),
        lease_owner: r.opt_text(9)?,
        lease_until: r.opt_int(10).map(from_ms),
        epoch: r.int(11),
        traceparent: r.opt_text(12)?,
        last_error: r.opt_text(13)?,
        reason: r.opt_text(14)?,
        created_at: from_ms(r.int(15)),
        updated_at: from_ms(r.int(16)),
        group: r.opt_text(17)?,
        group_seq: r.opt_int(18),
        parked: r.int(19) != 0,
    })
}
