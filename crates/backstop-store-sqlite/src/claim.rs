//! Claim: lease due pending tasks of one kind in a single statement, bumping `attempts` and
//! the fencing `epoch`.

use crate::db_err;
use crate::row::jiff_ms::{from_ms, to_ms};
use crate::row::parse_id;
use backstop_core::StoreError;
use backstop_core::store::{ClaimParams, ClaimedTask};
use sqlx::{Connection, Row, SqliteConnection};

const CLAIM: &str = "
UPDATE backstop_tasks
SET status = 'running', attempts = attempts + 1, epoch = epoch + 1,
    lease_owner = ?1, lease_until = ?2, updated_at = ?3,
    att_started_at = ?3, att_worker = ?1
WHERE seq IN (
    SELECT seq FROM backstop_tasks
    WHERE status = 'pending' AND kind = ?4 AND run_at <= ?3
    ORDER BY run_at
    LIMIT ?5)
RETURNING id, kind, key, payload, attempts, max_attempts, epoch, run_at, expires_at,
          traceparent, created_at";

pub(crate) async fn claim(
    conn: &mut SqliteConnection,
    p: &ClaimParams,
) -> Result<Vec<ClaimedTask>, StoreError> {
    if p.limit == 0 {
        return Ok(Vec::new());
    }
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let rows = sqlx::query(CLAIM)
        .bind(&p.owner)
        .bind(to_ms(p.lease_until))
        .bind(to_ms(p.now))
        .bind(&p.kind)
        .bind(p.limit as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    rows.iter()
        .map(|r| {
            Ok(ClaimedTask {
                id: parse_id(r.get("id"))?,
                kind: r.get("kind"),
                key: r.get("key"),
                payload: r.get("payload"),
                attempt: r.get::<i64, _>("attempts") as u32,
                max_attempts: r.get::<i64, _>("max_attempts") as u32,
                epoch: r.get("epoch"),
                run_at: from_ms(r.get("run_at")),
                expires_at: r.get::<Option<i64>, _>("expires_at").map(from_ms),
                traceparent: r.get("traceparent"),
                created_at: from_ms(r.get("created_at")),
            })
        })
        .collect()
}
