//! Attempts that ended without a report — a lease rescued after a crash, a lease given back at
//! shutdown — and the status moves that follow them and expiry. Shared by `lease` and
//! `rescue`; the rows are already locked by the caller's transaction.

use crate::Db;
use crate::groups::{Member, member};
use crate::row::{col, status_code};
use crate::shapes::{chunks, padded_lists, repeat};
use backstop_core::Status;
use sqlx::MySqlConnection;
use sqlx::mysql::MySqlRow;

/// A running row whose attempt ends here.
pub(crate) struct Held {
    pub(crate) seq: i64,
    pub(crate) id: Vec<u8>,
    pub(crate) attempts: i64,
    pub(crate) lease_owner: Option<String>,
    pub(crate) started_at: Option<i64>,
    /// Its ordering group, if it has one: promoted if the task ends.
    pub(crate) group: Option<Member>,
}

/// The columns [`Held::read`] needs.
pub(crate) const HELD_COLUMNS: &str =
    "seq, id, attempts, lease_owner, att_started_at, kind, grp, grp_skip";

impl Held {
    pub(crate) fn read(r: &MySqlRow) -> Result<Self, backstop_core::StoreError> {
        Ok(Held {
            seq: col(r, "seq")?,
            id: col(r, "id")?,
            attempts: col(r, "attempts")?,
            lease_owner: col(r, "lease_owner")?,
            started_at: col(r, "att_started_at")?,
            group: member(r)?,
        })
    }
}

/// Events per `INSERT`, largest first.
const SHAPES: &[usize] = &[64, 16, 4, 1];

const RECORD: &str = "INSERT INTO {events} \
    (task_id, type, at, attempt, outcome, error, duration_ms, worker) VALUES ";
const RECORD_ROW: &str = "(?, 'attempt', ?, ?, ?, ?, ?, ?)";

/// Writes one `attempt` event per row, ended at `now` with `outcome`; the error names the
/// lease owner after `error_prefix`.
pub(crate) async fn record_attempts(
    db: &Db,
    conn: &mut MySqlConnection,
    rows: &[Held],
    now: i64,
    outcome: &str,
    error_prefix: &str,
) -> Result<(), sqlx::Error> {
    for chunk in chunks(rows, SHAPES) {
        let sql = format!("{RECORD}{}", repeat(RECORD_ROW, ", ", chunk.len()));
        let mut q = sqlx::query(db.tables.q(&sql));
        for h in chunk {
            let owner = h.lease_owner.as_deref();
            q = q
                .bind(h.id.as_slice())
                .bind(now)
                .bind(h.attempts)
                .bind(outcome)
                .bind(format!("{error_prefix}{}", owner.unwrap_or("unknown")))
                .bind(h.started_at.map(|s| now - s))
                .bind(owner);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Where rows go, and what changes on the way.
pub(crate) struct Move<'a> {
    pub(crate) to: Status,
    /// The next run time (pending rows run again promptly); `None` keeps it.
    pub(crate) run_at: Option<i64>,
    /// `None` keeps the row's.
    pub(crate) reason: Option<&'a str>,
    /// `None` keeps the row's.
    pub(crate) last_error: Option<&'a str>,
    pub(crate) now: i64,
}

/// A parked task that ends (expires) is parked no more: its own `run_at` comes back.
const MOVE: &str = "
UPDATE {tasks}
SET status = ?, run_at = COALESCE(?, parked_run_at, run_at), parked_run_at = NULL,
    reason = COALESCE(?, reason),
    last_error = COALESCE(?, last_error), lease_owner = NULL, lease_until = NULL,
    updated_at = ?, att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL,
    att_error = NULL, att_http_status = NULL, att_worker = NULL
WHERE seq IN ";

/// Applies `m` to the rows `seqs`.
pub(crate) async fn move_rows(
    db: &Db,
    conn: &mut MySqlConnection,
    seqs: &[i64],
    m: &Move<'_>,
) -> Result<(), sqlx::Error> {
    for list in padded_lists(seqs) {
        let sql = format!("{MOVE}({})", repeat("?", ", ", list.len()));
        let mut q = sqlx::query(db.tables.q(&sql))
            .bind(status_code(m.to))
            .bind(m.run_at)
            .bind(m.reason)
            .bind(m.last_error)
            .bind(m.now);
        for seq in list {
            q = q.bind(seq);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}
