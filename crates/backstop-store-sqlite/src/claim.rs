//! Claim: lease due pending tasks of one kind, bumping `attempts` and the fencing `epoch`.
//!
//! The batch crosses from SQLite to Rust as one JSON row rather than one row per task: sqlx
//! hands every result row to the async side separately, which costs more than the claim
//! itself at thousands of tasks a second.

use crate::db_err;
use crate::row::jiff_ms::{from_ms, to_ms};
use crate::row::parse_id;
use backstop_core::StoreError;
use backstop_core::store::{ClaimParams, ClaimedTask};
use sqlx::{Connection, SqliteConnection};

const PICK: &str = "
SELECT json_group_array(seq) FROM (
    SELECT seq FROM backstop_tasks
    WHERE status = 'pending' AND kind = ?1 AND run_at <= ?2
    ORDER BY run_at
    LIMIT ?3)";

const LEASE: &str = "
UPDATE backstop_tasks
SET status = 'running', attempts = attempts + 1, epoch = epoch + 1,
    lease_owner = ?2, lease_until = ?3, updated_at = ?4,
    att_started_at = ?4, att_worker = ?2
WHERE seq IN (SELECT value FROM json_each(?1))";

const READ: &str = "
SELECT json_group_array(json_array(id, key, hex(payload), attempts, max_attempts, epoch, run_at,
                                   expires_at, traceparent, created_at))
FROM backstop_tasks WHERE seq IN (SELECT value FROM json_each(?1))";

type Row = (
    String,
    String,
    String,
    u32,
    u32,
    i64,
    i64,
    Option<i64>,
    Option<String>,
    i64,
);

pub(crate) async fn claim(
    conn: &mut SqliteConnection,
    p: &ClaimParams,
) -> Result<Vec<ClaimedTask>, StoreError> {
    if p.limit == 0 {
        return Ok(Vec::new());
    }
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let seqs: String = sqlx::query_scalar(PICK)
        .bind(&p.kind)
        .bind(to_ms(p.now))
        .bind(p.limit as i64)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    if seqs == "[]" {
        return Ok(Vec::new());
    }
    sqlx::query(LEASE)
        .bind(&seqs)
        .bind(&p.owner)
        .bind(to_ms(p.lease_until))
        .bind(to_ms(p.now))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    let rows: String = sqlx::query_scalar(READ)
        .bind(&seqs)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    let rows: Vec<Row> = serde_json::from_str(&rows)
        .map_err(|e| StoreError::Database(format!("claim result: {e}")))?;
    rows.into_iter()
        .map(|r| {
            Ok(ClaimedTask {
                id: parse_id(&r.0)?,
                kind: p.kind.clone(),
                key: r.1,
                payload: unhex(&r.2)?,
                attempt: r.3,
                max_attempts: r.4,
                epoch: r.5,
                run_at: from_ms(r.6),
                expires_at: r.7.map(from_ms),
                traceparent: r.8,
                created_at: from_ms(r.9),
            })
        })
        .collect()
}

fn unhex(s: &str) -> Result<Vec<u8>, StoreError> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'A'..=b'F' => Some(c - b'A' + 10),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    s.as_bytes()
        .chunks(2)
        .map(|p| match p {
            [h, l] => Some(nibble(*h)? << 4 | nibble(*l)?),
            _ => None,
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| StoreError::Database("claim result: bad payload encoding".into()))
}
