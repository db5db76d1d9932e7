//! The claim of a kind limited per key ([`backstop_core::limit`]): the keys of the kind's
//! running tasks with a live lease are counted, due tasks are read oldest first in windows,
//! and each is taken only while its key has a free slot; a full key's tasks are passed over
//! and the reading goes on (up to [`SCAN_BUDGET`] rows), so one busy key cannot starve the
//! others. Every task taken starts (none is held) and its key is written on its row. The
//! single writer serialises these claims, as it does every write.

use crate::claim::{LEASE_SQL, lease_rows, task_at};
use crate::raw::{Db, Value};
use crate::row::jiff_ms::to_ms;
use backstop_core::StoreError;
use backstop_core::limit::{Admission, PerKey, SCAN_BUDGET};
use backstop_core::store::{ClaimParams, ClaimedTask};

/// The keys of the kind's running tasks whose lease has not ended (`?2` now), with how many.
pub(crate) const RUNNING_KEYS: &str = "
SELECT lkey, count(*) FROM backstop_tasks INDEXED BY backstop_tasks_running_keys
WHERE status = 1 AND lkey IS NOT NULL AND kind = ?1 AND lease_until > ?2
GROUP BY lkey";

/// Due tasks after the cursor `(?4, ?5)`, oldest `run_at` first, at most `?3` (the columns of
/// `claim::PICK`).
pub(crate) const PICK_AFTER: &str = "
SELECT seq, id, key, payload, attempts, max_attempts, epoch, run_at, expires_at, traceparent,
       created_at, checkpoint, grp
FROM backstop_tasks
WHERE status = 0 AND kind = ?1 AND run_at <= ?2
  AND (run_at > ?4 OR (run_at = ?4 AND seq > ?5))
ORDER BY run_at, seq
LIMIT ?3";

const SET_KEY: &str = "UPDATE backstop_tasks SET lkey = ?2 WHERE seq = ?1";

/// Claims and starts up to `min(limit, start)` tasks of `p.kind` whose keys have a free slot.
pub(crate) fn lease(
    db: &Db<'_>,
    p: &ClaimParams,
    limit: &PerKey,
) -> Result<Vec<ClaimedTask>, StoreError> {
    let want = p.limit.min(p.start);
    if want == 0 {
        return Ok(Vec::new());
    }
    let now = to_ms(p.now);
    let mut running = Vec::new();
    db.prepare(RUNNING_KEYS)?
        .query(&[p.kind.as_str().into(), now.into()], |r| {
            running.push((r.text(0)?.to_owned(), r.int(1) as u32));
            Ok(())
        })?;
    let mut admission = Admission::new(limit, running);
    let (mut cursor, mut scanned) = ((i64::MIN, i64::MIN), 0);
    let mut taken: Vec<(i64, String)> = Vec::new();
    let mut claimed = Vec::new();
    let mut pick = db.prepare(PICK_AFTER)?;
    while taken.len() < want && scanned < SCAN_BUDGET {
        let window = Admission::window(want, scanned);
        let mut read = 0;
        pick.query(
            &[
                p.kind.as_str().into(),
                now.into(),
                (window as i64).into(),
                cursor.0.into(),
                cursor.1.into(),
            ],
            |r| {
                read += 1;
                let seq = r.int(0);
                cursor = (r.int(7), seq);
                if taken.len() < want
                    && let Some(key) = admission.admit(r.blob(3))
                {
                    taken.push((seq, key));
                    claimed.push(task_at(r, p, true)?);
                }
                Ok(())
            },
        )?;
        scanned += read;
        if read < window {
            break;
        }
    }
    let seqs: Vec<i64> = taken.iter().map(|t| t.0).collect();
    lease_rows(db, p, &seqs, &LEASE_SQL)?;
    let mut set = db.prepare(SET_KEY)?;
    for (seq, key) in &taken {
        set.execute(&[Value::Int(*seq), key.as_str().into()])?;
    }
    Ok(claimed)
}
