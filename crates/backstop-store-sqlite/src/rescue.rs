//! The reconciler's repairs: rescue of running tasks whose lease expired, and expiry of
//! pending tasks past their business deadline (the [`Rescue`] impl). Each status change is
//! decided by `backstop_core::transition` per row, then applied in one statement.

use crate::SqliteStore;
use crate::db_err;
use crate::lease::{MOVE, end_attempts, ended_move};
use crate::row::jiff_ms::to_ms;
use crate::row::{parse_id, status_code};
use backstop_core::store::Cause;
use backstop_core::store::{BoxFuture, ExpireParams, Rescue, RescueParams, Rescued};
use backstop_core::{Status, StoreError, Transition, transition};
use serde_json::json;
use sqlx::{Connection, Row, SqliteConnection};

/// Running tasks whose lease expired, oldest lease first.
pub(crate) const RESCUE_PICK: &str = "
SELECT seq, id, kind, attempts, max_attempts, lease_owner, grp FROM backstop_tasks
WHERE status = 1 AND lease_until < ?1 ORDER BY lease_until LIMIT ?2";

/// Pending tasks past their deadline, earliest first.
pub(crate) const EXPIRE_PICK: &str = "
SELECT seq FROM backstop_tasks
WHERE status = 0 AND expires_at IS NOT NULL AND expires_at <= ?1
ORDER BY expires_at LIMIT ?2";

impl Rescue for SqliteStore {
    fn rescue(&self, p: RescueParams) -> BoxFuture<'_, Result<Vec<Rescued>, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            rescue(&mut w, &p).await
        })
    }

    fn expire(&self, p: ExpireParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            expire(&mut w, &p).await
        })
    }
}

async fn rescue(conn: &mut SqliteConnection, p: &RescueParams) -> Result<Vec<Rescued>, StoreError> {
    let now = to_ms(p.now);
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let rows = sqlx::query(RESCUE_PICK)
        .bind(now)
        .bind(p.limit as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut rescued = Vec::with_capacity(rows.len());
    let mut moves = Vec::with_capacity(rows.len());
    for r in &rows {
        let (status, m) = ended_move(
            r,
            |attempts_left| Transition::Rescue { attempts_left },
            "the last lease expired",
            "lease expired",
        )?;
        moves.push(m);
        rescued.push(Rescued {
            id: parse_id(r.get("id"))?,
            kind: r.get("kind"),
            status,
            lease_owner: r.get("lease_owner"),
            group: r.get("grp"),
        });
    }
    let moves = serde_json::Value::Array(moves).to_string();
    end_attempts(
        &mut tx,
        &moves,
        now,
        "lease_expired",
        "lease expired; held by ",
    )
    .await?;
    tx.commit().await.map_err(db_err)?;
    Ok(rescued)
}

/// The `{seq, status, reason}` list that [`MOVE`] applies, one status for every row.
fn moves_json(seqs: &[i64], to: Status, reason: Option<&str>) -> String {
    serde_json::Value::Array(
        seqs.iter()
            .map(|s| json!({"seq": s, "status": status_code(to), "reason": reason}))
            .collect(),
    )
    .to_string()
}

async fn expire(conn: &mut SqliteConnection, p: &ExpireParams) -> Result<u64, StoreError> {
    let now = to_ms(p.now);
    let compensated = transition(Status::Pending, Transition::Expire)
        .map_err(|e| StoreError::Database(Cause::new(e)))?;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let seqs: Vec<i64> = sqlx::query_scalar(EXPIRE_PICK)
        .bind(now)
        .bind(p.limit as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    if seqs.is_empty() {
        return Ok(0);
    }
    let moves = moves_json(&seqs, compensated, Some("expired"));
    sqlx::query(
        "INSERT INTO backstop_events (task_id, type, at, reason)
         SELECT t.id, 'expired', ?2, 'expired'
         FROM json_each(?1) AS j JOIN backstop_tasks AS t ON t.seq = j.value ->> 'seq'",
    )
    .bind(&moves)
    .bind(now)
    .execute(&mut *tx)
    .await
    .map_err(db_err)?;
    sqlx::query(MOVE)
        .bind(&moves)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    sqlx::query(sqlx::AssertSqlSafe(crate::groups::PROMOTE_MOVED.as_str()))
        .bind(&moves)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    Ok(seqs.len() as u64)
}
