//! Start: the attempts of held tasks begin, inside the completion's transaction (see
//! `complete`). MySQL has no `UPDATE … RETURNING`, so each task is one UPDATE by its unique
//! id, fenced by epoch, the pending status and the hold's owner; one that changes nothing was
//! no longer held. The rows are taken in id order.

use crate::Db;
use crate::row::{id_bytes, to_ms};
use crate::tx::Fail;
use backstop_core::store::{LeaseRef, StartParams};
use sqlx::MySqlConnection;

/// Binds: lease end, the `run_at` from before the hold, now, now, owner, id, epoch, owner.
const START: &str = "
UPDATE {tasks}
SET status = 1, attempts = attempts + 1, lease_until = ?, run_at = ?, updated_at = ?,
    att_started_at = ?, att_worker = ?
WHERE id = ? AND epoch = ? AND status = 0 AND lease_owner = ?";

/// Starts the held tasks of `p` on `conn` (the completion's transaction); returns the leases
/// no longer held.
pub(crate) async fn start_all(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &StartParams,
) -> Result<Vec<LeaseRef>, Fail> {
    let mut tasks = p.tasks.clone();
    tasks.sort_by_key(|t| t.lease.id);
    let now = to_ms(p.now);
    let mut lost = Vec::new();
    for t in &tasks {
        let changed = sqlx::query(db.tables.q(START))
            .bind(to_ms(t.lease_until))
            .bind(to_ms(t.run_at))
            .bind(now)
            .bind(now)
            .bind(p.owner.as_str())
            .bind(id_bytes(&t.lease.id).to_vec())
            .bind(t.lease.epoch)
            .bind(p.owner.as_str())
            .execute(&mut *conn)
            .await?
            .rows_affected();
        if changed == 0 {
            lost.push(t.lease);
        }
    }
    Ok(lost)
}
