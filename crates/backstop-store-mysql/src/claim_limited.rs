//! The claim of a kind limited per key ([`backstop_core::limit`]), in one transaction: the
//! kind's row of `claim_locks` is locked until the commit, serialising the kind's limited
//! claims, so two claimers never both take a key's last slot; the keys of the kind's running
//! tasks with a live lease are counted; due tasks are read oldest first in windows, each taken
//! only while its key has a free slot, a full key's tasks passed over and the reading going on
//! (up to [`SCAN_BUDGET`] rows), so one busy key cannot starve the others; and every task taken
//! starts (none is held), its key written on its row. A kind with a rate limit keeps each
//! key's GCRA time in `rate_keys`; a due task whose key may not start yet is moved to when it
//! may, with a `rate_limited` event.

use crate::Db;
use crate::claim::task_at;
use crate::row::{col, to_ms};
use crate::shapes::{padded_lists, repeat};
use crate::tx::Fail;
use backstop_core::group::OnFailure;
use backstop_core::limit::{
    Admission, KeyOverride, PerKey, RateState, SCAN_BUDGET, Verdict, rate_clock,
};
use backstop_core::store::{ClaimParams, ClaimedTask};
use sqlx::MySqlConnection;

/// Takes the kind's lock row (creating it the first time), locked until the commit.
const LOCK: &str =
    "INSERT INTO {claim_locks} (kind) VALUES (?) ON DUPLICATE KEY UPDATE kind = kind";

/// How many tasks of the kinds `{kinds}` are running with a live lease: a host's count, read
/// through the `leased` index.
const HOST_RUNNING: &str = "
SELECT count(*) FROM {tasks} WHERE status = 1 AND lease_until > ? AND kind IN ({kinds})";

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

/// Starts the taken rows, each one's key written in the same write (a second UPDATE per row
/// wrote it before): owner, lease end, now, now, owner, the kind's attempt budget, the group
/// skip flag, then `(seq, key)` pairs for the `CASE`, then the `seq` list.
const START_KEYED: &str = "
UPDATE {tasks}
SET status = 1, attempts = attempts + 1, epoch = epoch + 1,
    lease_owner = ?, lease_until = ?, updated_at = ?, att_started_at = ?, att_worker = ?,
    max_attempts = IF(max_attempts = 0, ?, max_attempts), grp_skip = grp IS NOT NULL AND ?,
    lkey = CASE seq {cases} END
WHERE seq IN ({seqs})";

/// The kind's keys whose rate state is still in the future (now in µs, twice).
const RATES: &str = "
SELECT rkey, tat, planned FROM {rate_keys} WHERE kind = ? AND (tat > ? OR planned > ?)";

const SAVE_RATE: &str = "
INSERT INTO {rate_keys} (kind, rkey, tat, planned) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE tat = VALUES(tat), planned = VALUES(planned)";

/// Rate state that means nothing any more (both times passed).
const FORGET_RATES: &str = "DELETE FROM {rate_keys} WHERE kind = ? AND tat <= ? AND planned <= ?";

/// The kind's overrides per key.
pub(crate) const OVERRIDES: &str = "
SELECT lkey, max, rate_limit, rate_period, rate_burst FROM {limit_overrides} WHERE kind = ?";

/// Moves throttled tasks to when they may start (ms) and says why on their timelines, a list
/// at a time: binds `(seq, run_at)` pairs, now, then the `seq` list.
const THROTTLE: &str = "UPDATE {tasks} SET run_at = CASE seq {cases} END, updated_at = ?
WHERE seq IN ({seqs})";
/// Binds now, `(seq, reason)` pairs, then the `seq` list.
const THROTTLED: &str = "
INSERT INTO {events} (task_id, type, at, reason)
SELECT id, 'rate_limited', ?, CASE seq {cases} END FROM {tasks} WHERE seq IN ({seqs})";

/// Claims and starts up to `min(limit, start)` tasks of `p.kind` whose keys have a free slot
/// and whose rate allows a start now; moves the due tasks whose rate does not to when it will.
pub(crate) async fn lease(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &ClaimParams,
    limit: &PerKey,
    began: std::time::Instant,
) -> Result<Vec<ClaimedTask>, Fail> {
    let mut want = p.limit.min(p.start);
    if want == 0 {
        return Ok(Vec::new());
    }
    let now = to_ms(p.now);
    sqlx::query(db.tables.q(LOCK))
        .bind(p.kind.as_str())
        .execute(&mut *conn)
        .await?;
    if let Some(host) = &limit.host {
        // After the kind's own lock, always in this order: no two claims wait on each other.
        sqlx::query(db.tables.q(LOCK))
            .bind(host.lock_name())
            .execute(&mut *conn)
            .await?;
        let sql = HOST_RUNNING.replace("{kinds}", &repeat("?", ", ", host.kinds.len().max(1)));
        let mut q = sqlx::query_as::<_, (i64,)>(db.tables.q(&sql)).bind(now);
        for k in &host.kinds {
            q = q.bind(k.as_str());
        }
        if host.kinds.is_empty() {
            q = q.bind(p.kind.as_str());
        }
        let (running,) = q.fetch_one(&mut *conn).await?;
        want = want.min(host.free(running.max(0) as u64));
        if want == 0 {
            return Ok(Vec::new());
        }
    }
    let now_us = rate_clock(p.now, began.elapsed());
    let running: Vec<(Vec<u8>, i64)> = match limit.concurrency {
        Some(_) => {
            sqlx::query_as(db.tables.q(RUNNING_KEYS))
                .bind(now)
                .bind(p.kind.as_str())
                .fetch_all(&mut *conn)
                .await?
        }
        None => Vec::new(),
    };
    let running = running.into_iter().map(|(k, n)| {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        (text(k), n)
    });
    type OverrideRow = (Vec<u8>, Option<i64>, Option<i64>, Option<i64>, Option<i64>);
    let overrides: Vec<OverrideRow> = sqlx::query_as(db.tables.q(OVERRIDES))
        .bind(p.kind.as_str())
        .fetch_all(&mut *conn)
        .await?;
    let rates: Vec<(Vec<u8>, i64, i64)> = match limit.rate {
        Some(_) => {
            sqlx::query_as(db.tables.q(RATES))
                .bind(p.kind.as_str())
                .bind(now_us)
                .bind(now_us)
                .fetch_all(&mut *conn)
                .await?
        }
        None => Vec::new(),
    };
    let mut admission = Admission::new(limit, now_us, running)
        .overrides(
            overrides
                .into_iter()
                .map(|(k, max, l, per, b)| (text(k), KeyOverride::from_row(max, l, per, b))),
        )
        .rates(
            rates
                .into_iter()
                .map(|(k, tat_us, planned_us)| (text(k), RateState { tat_us, planned_us })),
        );
    let (mut cursor, mut scanned) = ((i64::MIN, i64::MIN), 0);
    let mut taken: Vec<(i64, Option<String>)> = Vec::new();
    let mut claimed: Vec<ClaimedTask> = Vec::new();
    let mut throttled: Vec<(i64, i64, String)> = Vec::new();
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
            let verdict = admission.admit(&payload);
            match verdict {
                Verdict::Start { lkey } => {
                    taken.push((seq, lkey));
                    claimed.push(task_at(r, p, true)?);
                }
                Verdict::Pass => {}
                Verdict::Throttled { until_us, .. } => {
                    let reason = verdict.reason().unwrap_or_default();
                    // Rounded up: never due before the rate allows.
                    throttled.push((seq, (until_us + 999).div_euclid(1_000), reason));
                }
            }
        }
        if rows.len() < window {
            break;
        }
    }
    let all: Vec<usize> = (0..taken.len()).collect();
    let skip = p.on_group_failure == OnFailure::Skip;
    for list in padded_lists(&all) {
        let sql = shaped(START_KEYED, list.len());
        let mut q = sqlx::query(db.tables.q(&sql))
            .bind(p.owner.as_str())
            .bind(to_ms(p.lease_until))
            .bind(now)
            .bind(now)
            .bind(p.owner.as_str())
            .bind(i64::from(p.max_attempts))
            .bind(skip);
        for i in &list {
            q = q
                .bind(taken[*i].0)
                .bind(taken[*i].1.as_deref().map(str::as_bytes));
        }
        for i in &list {
            q = q.bind(taken[*i].0);
        }
        q.execute(&mut *conn).await?;
    }
    // In lists, not a statement per task: the claim holds the kind's lock meanwhile, and the
    // tasks it starts leave only once it commits (one statement per moved task kept the first
    // claim of a backlog for seconds, and its starts went out that much later than counted).
    let all: Vec<usize> = (0..throttled.len()).collect();
    for list in padded_lists(&all) {
        let sql = shaped(THROTTLE, list.len());
        let mut q = sqlx::query(db.tables.q(&sql));
        for i in &list {
            q = q.bind(throttled[*i].0).bind(throttled[*i].1);
        }
        q = q.bind(now);
        for i in &list {
            q = q.bind(throttled[*i].0);
        }
        q.execute(&mut *conn).await?;
        let sql = shaped(THROTTLED, list.len());
        let mut q = sqlx::query(db.tables.q(&sql)).bind(now);
        for i in &list {
            q = q.bind(throttled[*i].0).bind(throttled[*i].2.as_str());
        }
        for i in &list {
            q = q.bind(throttled[*i].0);
        }
        q.execute(&mut *conn).await?;
    }
    if limit.rate.is_some() {
        for (key, s) in admission.changed_rates() {
            sqlx::query(db.tables.q(SAVE_RATE))
                .bind(p.kind.as_str())
                .bind(key.as_bytes())
                .bind(s.tat_us)
                .bind(s.planned_us)
                .execute(&mut *conn)
                .await?;
        }
        sqlx::query(db.tables.q(FORGET_RATES))
            .bind(p.kind.as_str())
            .bind(now_us)
            .bind(now_us)
            .execute(&mut *conn)
            .await?;
    }
    Ok(claimed)
}

/// `template` for a list of `n` rows: its `{cases}` as `n` `WHEN ? THEN ?`, its `{seqs}` as
/// `n` placeholders.
fn shaped(template: &str, n: usize) -> String {
    template
        .replace("{cases}", &repeat("WHEN ? THEN ?", " ", n))
        .replace("{seqs}", &repeat("?", ", ", n))
}

/// A key stored as bytes, as text.
fn text(k: Vec<u8>) -> String {
    String::from_utf8(k).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}
