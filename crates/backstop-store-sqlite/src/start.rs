//! Start: the attempts of held tasks begin. Each is one UPDATE of its row, fenced by the
//! epoch, the pending status and the owner of the hold, stepped once per task on the locked
//! writer (see `raw`), inside the completion's transaction (see `complete`).

use crate::raw::Db;
use crate::row::id_bytes;
use crate::row::jiff_ms::to_ms;
use backstop_core::StoreError;
use backstop_core::store::{LeaseRef, StartParams};

/// `?1` id, `?2` epoch, `?3` owner, `?4` lease end, `?5` now, `?6` the `run_at` the task had
/// before it was held.
pub(crate) const START: &str = "
UPDATE backstop_tasks
SET status = 1, attempts = attempts + 1, lease_until = ?4, run_at = ?6, updated_at = ?5,
    att_started_at = ?5, att_worker = ?3
WHERE id = ?1 AND epoch = ?2 AND status = 0 AND lease_owner = ?3";

/// Starts the held tasks of `p`; returns the leases no longer held.
pub(crate) fn apply(db: &Db<'_>, p: &StartParams) -> Result<Vec<LeaseRef>, StoreError> {
    let mut stmt = db.prepare(START)?;
    let now = to_ms(p.now);
    let mut lost = Vec::new();
    for t in &p.tasks {
        let changed = stmt.execute(&[
            id_bytes(&t.lease.id).into(),
            t.lease.epoch.into(),
            p.owner.as_str().into(),
            to_ms(t.lease_until).into(),
            now.into(),
            to_ms(t.run_at).into(),
        ])?;
        if changed == 0 {
            lost.push(t.lease);
        }
    }
    Ok(lost)
}
