//! The claim of a kind limited per key ([`backstop_core::limit`]), in one transaction: the
//! kind's row of `claim_locks` is locked until the commit, serialising the kind's limited
//! claims, so two claimers never both take a key's last slot; the keys of the kind's running
//! tasks with a live lease are counted; due tasks are read oldest first in windows, each taken
//! only while its key has a free slot, a full key's tasks passed over and the reading going on
//! (up to [`SCAN_BUDGET`] rows), so one busy key cannot starve the others; and every task taken
//! starts (none is held), its key written on its row.

use crate::Db;
use crate::claim::{start_rows, task_at};
use crate::row::{col, to_ms};
use crate::tx::Fail;
use backstop_core::limit::{Admission, PerKey, SCAN_BUDGET};
use backstop_core::store::{ClaimParams, ClaimedTask};
use sqlx::MySqlConnection;

/// Takes the kind's lock row (creating it the first time), locked until the commit.
const LOCK: &str =
    "INSERT INTO {claim_locks} (kind) VALUES (?) ON DUPLICATE KEY UPDATE kind = kind";

/// The keys of the kind's running tasks whose lease has not ended, with how many.
const RUNNING_KEYS: &str = "
SELECT lkey, count(*) FROM {tasks}
WHERE status = 1 AND lease_until > ? AND kind = ? AND lkey IS NOT NULL
GROUP BY lkey";

/// Due tasks after the cursor `(run_at, seq)`, oldest first (the columns of `claim::PICK`).
const PICK_AFTER: &str = "
SELECT seq, id, `key`, payload, attempts, max_attempts, epoch, run_at, expires_at, traceparent,
       created_at, checkpoint, grp
FROM {tasks}
WHERE status = 0 AND kind = ? AND run_at <= ? AND (run_at > ? OR (run_at = ? AND seq > ?))
ORDER BY run_at, seq
LIMIT ?
FOR UPDATE SKIP LOCKED";

const SET_KEY: &str = "UPDATE {tasks} SET lkey = ? WHERE seq = ?";

/// Claims and starts up to `min(limit, start)` tasks of `p.kind` whose keys have a free slot.
pub(crate) async fn lease(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &ClaimParams,
    limit: &PerKey,
) -> Result<Vec<ClaimedTask>, Fail> {
    let want = p.limit.min(p.start);
    if want == 0 {
        return Ok(Vec::new());
    }
    let now = to_ms(p.now);
    sqlx::query(db.tables.q(LOCK))
        .bind(p.kind.as_str())
        .execute(&mut *conn)
        .await?;
    let running: Vec<(Vec<u8>, i64)> = sqlx::query_as(db.tables.q(RUNNING_KEYS))
        .bind(now)
        .bind(p.kind.as_str())
        .fetch_all(&mut *conn)
        .await?;
    let running = running.into_iter().map(|(k, n)| {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        (String::from_utf8_lossy(&k).into_owned(), n)
    });
    let mut admission = Admission::new(limit, running);
    let (mut cursor, mut scanned) = ((i64::MIN, i64::MIN), 0);
    let (mut taken, mut claimed): (Vec<(i64, String)>, Vec<ClaimedTask>) = (Vec::new(), Vec::new());
    while taken.len() < want && scanned < SCAN_BUDGET {
        let window = Admission::window(want, scanned);
        let rows = sqlx::query(db.tables.q(PICK_AFTER))
            .bind(p.kind.as_str())
            .bind(now)
            .bind(cursor.0)
            .bind(cursor.0)
            .bind(cursor.1)
            .bind(i64::try_from(window).unwrap_or(i64::MAX))
            .fetch_all(&mut *conn)
            .await?;
        scanned += rows.len();
        for r in &rows {
            let seq: i64 = col(r, "seq")?;
            cursor = (col(r, "run_at")?, seq);
            if taken.len() == want {
                break;
            }
            let payload: Vec<u8> = col(r, "payload")?;
            if let Some(key) = admission.admit(&payload) {
                taken.push((seq, key));
                claimed.push(task_at(r, p, true)?);
            }
        }
        if rows.len() < window {
            break;
        }
    }
    let seqs: Vec<i64> = taken.iter().map(|t| t.0).collect();
    start_rows(db, conn, p, &seqs).await?;
    for (seq, key) in &taken {
        sqlx::query(db.tables.q(SET_KEY))
            .bind(key.as_bytes())
            .bind(seq)
            .execute(&mut *conn)
            .await?;
    }
    Ok(claimed)
}
