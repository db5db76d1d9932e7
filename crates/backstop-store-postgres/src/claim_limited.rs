//! The claim of a kind limited per key ([`backstop_core::limit`]), in one transaction: an
//! advisory lock per kind (released at commit) serialises the kind's limited claims, so two
//! claimers never both take a key's last slot; the keys of the kind's running tasks with a live
//! lease are counted; due tasks are read oldest first in windows, each taken only while its key
//! has a free slot, a full key's tasks passed over and the reading going on (up to
//! [`SCAN_BUDGET`] rows), so one busy key cannot starve the others; and every task taken
//! starts (none is held), its key written on its row. A kind with a rate limit keeps each
//! key's GCRA time in `rate_keys`; a due task whose key may not start yet is moved to when it
//! may, with a `rate_limited` event.

use crate::claim::claimed_rows;
use crate::claim_lock::{begin_locked, lock_in};
use crate::types::Time;
use crate::{Db, db_err};
use backstop_core::StoreError;
use backstop_core::group::OnFailure;
use backstop_core::limit::{
    Admission, KeyOverride, PerKey, RateState, SCAN_BUDGET, Verdict, rate_clock,
};
use backstop_core::store::{ClaimParams, ClaimedTask};
use jiff::Timestamp;
use sqlx::postgres::{PgBindIterExt, PgRow};
use sqlx::{AssertSqlSafe, PgConnection, Row};

/// Everything a limited claim reads once its locks are held, in one statement (a round trip
/// less for each part, all of them made while the kind's claims wait): rows tagged by `part`.
/// `$1` kind, `$2` now, `$3` the first window's size, `$4` now in µs (the rate's clock), `$5`
/// whether the kind has a concurrency limit, `$6` whether it has a rate, `$7` the host's kinds
/// (NULL: no host limit).
/// - 0, the keys of the kind's running tasks whose lease has not ended: `k` key, `n` how many;
/// - 1, the kind's overrides: `k` key, `n` max, `a` rate limit, `b` period, `c` burst;
/// - 2, the keys whose rate state is still in the future: `k` key, `n` tat, `a` planned;
/// - 3, how many of the host's tasks run with a live lease (read through the index of running
///   leases): `n`;
/// - 4, the first window of due tasks, oldest first, locked: `n` seq, `at` run_at, `payload`.
///
/// A separate statement from the locks': its snapshot must be taken after they were granted,
/// so it sees every start the previous holder committed.
pub(crate) const READ: &str = "
WITH due AS MATERIALIZED (
    SELECT seq, run_at, payload FROM {schema}.tasks
    WHERE status = 'pending' AND kind = $1 AND run_at <= $2
    ORDER BY run_at, seq
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
SELECT 0 AS part, lkey AS k, count(*) AS n, NULL::bigint AS a, NULL::bigint AS b,
       NULL::bigint AS c, NULL::timestamptz AS at, NULL::bytea AS payload
FROM {schema}.tasks
WHERE $5 AND status = 'running' AND lkey IS NOT NULL AND kind = $1 AND lease_until > $2
GROUP BY lkey
UNION ALL
SELECT 1, lkey, max, rate_limit, rate_period, rate_burst, NULL, NULL
FROM {schema}.limit_overrides WHERE kind = $1
UNION ALL
SELECT 2, rkey, tat, planned, NULL, NULL, NULL, NULL
FROM {schema}.rate_keys WHERE $6 AND kind = $1 AND (tat > $4 OR planned > $4)
UNION ALL
SELECT 3, NULL, count(*), NULL, NULL, NULL, NULL, NULL
FROM {schema}.tasks
WHERE $7::text[] IS NOT NULL AND status = 'running' AND lease_until > $2 AND kind = ANY ($7::text[])
UNION ALL
SELECT 4, NULL, seq, NULL, NULL, NULL, run_at, payload FROM due";

/// The next window, after the cursor `($4, $5)`; its columns named as [`READ`]'s due rows'.
pub(crate) const PICK_AFTER: &str = "
SELECT seq AS n, run_at AS at, payload FROM {schema}.tasks
WHERE status = 'pending' AND kind = $1 AND run_at <= $2 AND (run_at, seq) > ($4, $5)
ORDER BY run_at, seq
LIMIT $3
FOR UPDATE SKIP LOCKED";

/// Everything a limited claim writes, in one statement: it starts the chosen rows (`$1` seqs,
/// `$5` their keys; `$2` now, `$3` owner, `$4` lease end, `$6` the kind's attempt budget, `$7`
/// whether a failed task of a group lets it go on), returning the same columns as
/// `claim::CLAIM`; moves the throttled tasks (`$8` seqs) to when they may start (`$9`, µs
/// since the epoch) with a `rate_limited` event saying why (`$10`); and when the kind has a
/// rate (`$11`), stores the changed rate states of kind `$12` (`$13` keys, `$14` tats, `$15`
/// planned) and forgets the ones whose times have both passed (`$16` now, in µs). The rows
/// each part changes are distinct, as one statement requires.
const WRITE: &str = "
WITH moved AS (
    UPDATE {schema}.tasks AS t
    SET run_at = timestamptz 'epoch' + c.until * interval '1 microsecond', updated_at = $2
    FROM unnest($8::bigint[], $9::bigint[], $10::text[]) AS c(seq, until, reason)
    WHERE t.seq = c.seq
    RETURNING t.id, c.reason
),
said AS (
    INSERT INTO {schema}.events (task_id, type, at, reason)
    SELECT id, 'rate_limited', $2, reason FROM moved
),
saved AS (
    INSERT INTO {schema}.rate_keys (kind, rkey, tat, planned)
    SELECT $12, c.rkey, c.tat, c.planned
    FROM unnest($13::text[], $14::bigint[], $15::bigint[]) AS c(rkey, tat, planned)
    WHERE $11
    ON CONFLICT (kind, rkey) DO UPDATE SET tat = excluded.tat, planned = excluded.planned
),
forgotten AS (
    DELETE FROM {schema}.rate_keys
    WHERE $11 AND kind = $12 AND tat <= $16 AND planned <= $16 AND rkey <> ALL ($13::text[])
)
UPDATE {schema}.tasks AS t
SET status = 'running', attempts = t.attempts + 1, epoch = t.epoch + 1,
    lease_owner = $3, lease_until = $4, updated_at = $2,
    att_started_at = $2, att_worker = $3,
    max_attempts = CASE t.max_attempts WHEN 0 THEN $6 ELSE t.max_attempts END,
    grp_skip = CASE WHEN t.grp IS NULL THEN t.grp_skip ELSE $7 END,
    lkey = c.lkey
FROM unnest($1::bigint[], $5::text[]) AS c(seq, lkey)
WHERE t.seq = c.seq
RETURNING t.seq, t.id, t.key, t.payload, t.attempts AS attempt, t.max_attempts, t.epoch,
          t.run_at, t.expires_at, t.traceparent, t.created_at, t.checkpoint, true AS started,
          t.grp";

/// Claims and starts up to `min(limit, start)` tasks of `p.kind` whose keys have a free slot
/// and whose rate allows a start now; moves the due tasks whose rate does not to when it will.
/// Four round trips: the transaction's begin with its locks, [`READ`], [`WRITE`] and the
/// commit (more windows of due tasks only when full keys fill the first).
pub(crate) async fn claim(
    db: &Db,
    p: &ClaimParams,
    limit: &PerKey,
) -> Result<Vec<ClaimedTask>, StoreError> {
    let began = std::time::Instant::now();
    let Some(keys) = lock_keys(db, p, limit).await? else {
        return Ok(Vec::new());
    };
    let mut tx = db
        .pool
        .begin_with(AssertSqlSafe(begin_locked(&keys)))
        .await
        .map_err(db_err)?;
    let claimed = claim_locked(db, &mut tx, p, limit, began).await?;
    tx.commit().await.map_err(db_err)?;
    Ok(claimed)
}

/// The same claim in the open transaction `tx` (a completion's, after its outcomes); `began`
/// is when the caller began, as the rate counts it. The locks are held until `tx` ends.
pub(crate) async fn claim_in(
    db: &Db,
    tx: &mut PgConnection,
    p: &ClaimParams,
    limit: &PerKey,
    began: std::time::Instant,
) -> Result<Vec<ClaimedTask>, StoreError> {
    let Some(keys) = lock_keys(db, p, limit).await? else {
        return Ok(Vec::new());
    };
    lock_in(tx, &keys).await?;
    claim_locked(db, tx, p, limit, began).await
}

/// The keys of the claim's locks, in the order every claim takes them: the kind's, then its
/// host's, so no two claims wait on each other. `None` when the claim would start nothing.
async fn lock_keys(
    db: &Db,
    p: &ClaimParams,
    limit: &PerKey,
) -> Result<Option<Vec<i64>>, StoreError> {
    if p.limit.min(p.start) == 0 {
        return Ok(None);
    }
    let mut names = vec![p.kind.clone()];
    names.extend(limit.host.as_ref().map(|h| h.lock_name()));
    db.claim_locks.keys(db, &names).await.map(Some)
}

/// The claim once its locks are held.
async fn claim_locked(
    db: &Db,
    tx: &mut PgConnection,
    p: &ClaimParams,
    limit: &PerKey,
    began: std::time::Instant,
) -> Result<Vec<ClaimedTask>, StoreError> {
    let mut want = p.limit.min(p.start);
    let now_us = rate_clock(p.now, began.elapsed());
    let first = Admission::window(want, 0);
    let rows = sqlx::query(db.schema.sql(READ))
        .bind(&p.kind)
        .bind(Time(p.now))
        .bind(i64::try_from(first).unwrap_or(i64::MAX))
        .bind(now_us)
        .bind(limit.concurrency.is_some())
        .bind(limit.rate.is_some())
        .bind(limit.host.as_ref().map(|h| &h.kinds))
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    let mut read = Read::default();
    for r in &rows {
        read.add(r)?;
    }
    if let Some(host) = &limit.host {
        want = want.min(host.free(read.host_running));
        if want == 0 {
            return Ok(Vec::new());
        }
    }
    let mut admission = Admission::new(limit, now_us, read.running)
        .overrides(read.overrides)
        .rates(read.rates);
    // The first window in its order, then the next ones as full keys pass theirs over.
    read.due.sort_by_key(|d| (d.run_at, d.seq));
    let mut scanned = read.due.len();
    let mut exhausted = scanned < first;
    let mut due = read.due;
    let mut cursor: Option<(Timestamp, i64)> = None;
    let (mut seqs, mut keys) = (Vec::new(), Vec::<Option<String>>::new());
    let mut throttled = Throttled::default();
    loop {
        for d in &due {
            cursor = Some((d.run_at, d.seq));
            if seqs.len() == want {
                break;
            }
            let verdict = admission.admit(&d.payload);
            match verdict {
                Verdict::Start { lkey } => {
                    seqs.push(d.seq);
                    keys.push(lkey);
                }
                Verdict::Pass => {}
                Verdict::Throttled { until_us, .. } => {
                    throttled.seqs.push(d.seq);
                    throttled.until.push(until_us);
                    throttled.reasons.push(verdict.reason().unwrap_or_default());
                }
            }
        }
        if exhausted || seqs.len() >= want || scanned >= SCAN_BUDGET {
            break;
        }
        let window = Admission::window(want, scanned);
        let (at, seq) = cursor.expect("a full window read rows");
        let rows = sqlx::query(db.schema.sql(PICK_AFTER))
            .bind(&p.kind)
            .bind(Time(p.now))
            .bind(i64::try_from(window).unwrap_or(i64::MAX))
            .bind(Time(at))
            .bind(seq)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_err)?;
        scanned += rows.len();
        exhausted = rows.len() < window;
        due = rows.iter().map(Due::from_row).collect::<Result<_, _>>()?;
    }
    let rated = limit.rate.is_some();
    if seqs.is_empty() && throttled.seqs.is_empty() && !rated {
        return Ok(Vec::new());
    }
    let (mut rkeys, mut tats, mut planned) = (Vec::new(), Vec::new(), Vec::new());
    for (k, s) in admission.changed_rates() {
        rkeys.push(k);
        tats.push(s.tat_us);
        planned.push(s.planned_us);
    }
    let rows = sqlx::query(db.schema.sql(WRITE))
        .bind(&seqs)
        .bind(Time(p.now))
        .bind(&p.owner)
        .bind(Time(p.lease_until))
        .bind(keys.iter().map(Option::as_deref).bind_iter())
        .bind(i64::from(p.max_attempts))
        .bind(p.on_group_failure == OnFailure::Skip)
        .bind(&throttled.seqs)
        .bind(&throttled.until)
        .bind(&throttled.reasons)
        .bind(rated)
        .bind(&p.kind)
        .bind(&rkeys)
        .bind(&tats)
        .bind(&planned)
        .bind(now_us)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    claimed_rows(&rows, p)
}

/// What [`READ`] gave, by part.
#[derive(Default)]
struct Read {
    running: Vec<(String, u32)>,
    overrides: Vec<(String, KeyOverride)>,
    rates: Vec<(String, RateState)>,
    host_running: u64,
    due: Vec<Due>,
}

/// A due task a window read: its place in the order, and its payload for its key.
struct Due {
    seq: i64,
    run_at: Timestamp,
    payload: Vec<u8>,
}

impl Due {
    /// From a due row of [`READ`] or a row of [`PICK_AFTER`], which name their columns alike.
    fn from_row(r: &PgRow) -> Result<Self, StoreError> {
        let Time(run_at) = r.try_get("at").map_err(db_err)?;
        Ok(Due {
            seq: r.try_get("n").map_err(db_err)?,
            run_at,
            payload: r.try_get("payload").map_err(db_err)?,
        })
    }
}

impl Read {
    fn add(&mut self, r: &PgRow) -> Result<(), StoreError> {
        let part: i32 = r.try_get("part").map_err(db_err)?;
        let k = || r.try_get::<Option<String>, _>("k").map_err(db_err);
        let n = || r.try_get::<Option<i64>, _>("n").map_err(db_err);
        let a = || r.try_get::<Option<i64>, _>("a").map_err(db_err);
        match part {
            0 => {
                let count = u32::try_from(n()?.unwrap_or(0)).unwrap_or(u32::MAX);
                self.running.push((k()?.unwrap_or_default(), count));
            }
            1 => {
                let b = r.try_get::<Option<i64>, _>("b").map_err(db_err)?;
                let c = r.try_get::<Option<i64>, _>("c").map_err(db_err)?;
                let o = KeyOverride::from_row(n()?, a()?, b, c);
                self.overrides.push((k()?.unwrap_or_default(), o));
            }
            2 => {
                let state = RateState {
                    tat_us: n()?.unwrap_or(0),
                    planned_us: a()?.unwrap_or(0),
                };
                self.rates.push((k()?.unwrap_or_default(), state));
            }
            3 => self.host_running = n()?.unwrap_or(0).max(0) as u64,
            _ => self.due.push(Due::from_row(r)?),
        }
        Ok(())
    }
}

/// The tasks a claim moves on for their keys' rates.
#[derive(Default)]
struct Throttled {
    seqs: Vec<i64>,
    until: Vec<i64>,
    reasons: Vec<String>,
}
