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
use crate::types::Time;
use crate::{Db, db_err};
use backstop_core::StoreError;
use backstop_core::group::OnFailure;
use backstop_core::limit::{
    Admission, KeyOverride, PerKey, RateState, SCAN_BUDGET, Verdict, rate_clock,
};
use backstop_core::store::{ClaimParams, ClaimedTask};
use jiff::Timestamp;
use sqlx::postgres::PgBindIterExt;
use sqlx::{PgConnection, Row};

/// `$1` the schema, `$2` the kind.
const LOCK: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended('backstop claim ' || $1 || ' ' || $2, 0))";

/// How many tasks of the kinds `$1` are running with a live lease (`$2` now): a host's count,
/// read through the index of running leases.
const HOST_RUNNING: &str = "
SELECT count(*) FROM {schema}.tasks
WHERE status = 'running' AND lease_until > $2 AND kind = ANY ($1::text[])";

/// The keys of kind `$1`'s running tasks whose lease has not ended (`$2` now), with how many.
const RUNNING_KEYS: &str = "
SELECT lkey, count(*) FROM {schema}.tasks
WHERE status = 'running' AND lkey IS NOT NULL AND kind = $1 AND lease_until > $2
GROUP BY lkey";

/// The first window of due tasks of kind `$1` at `$2`, at most `$3`, oldest first.
const PICK_FIRST: &str = "
SELECT seq, run_at, payload FROM {schema}.tasks
WHERE status = 'pending' AND kind = $1 AND run_at <= $2
ORDER BY run_at, seq
LIMIT $3
FOR UPDATE SKIP LOCKED";

/// The next window, after the cursor `($4, $5)`.
const PICK_AFTER: &str = "
SELECT seq, run_at, payload FROM {schema}.tasks
WHERE status = 'pending' AND kind = $1 AND run_at <= $2 AND (run_at, seq) > ($4, $5)
ORDER BY run_at, seq
LIMIT $3
FOR UPDATE SKIP LOCKED";

/// Starts the chosen rows (`$1` seqs, `$5` their keys): `$2` now, `$3` owner, `$4` lease end,
/// `$6` the kind's attempt budget, `$7` whether a failed task of a group lets it go on; the
/// same columns as `claim::CLAIM` returns.
const START: &str = "
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

/// The kind `$1`'s keys whose rate state is still in the future (`$2` now, in µs).
const RATES: &str = "
SELECT rkey, tat, planned FROM {schema}.rate_keys
WHERE kind = $1 AND (tat > $2 OR planned > $2)";

/// Stores the changed rate states (`$2` keys, `$3` tats, `$4` planned) and forgets the ones
/// whose times have both passed (`$5` now, in µs).
const SAVE_RATES: &str = "
WITH saved AS (
    INSERT INTO {schema}.rate_keys (kind, rkey, tat, planned)
    SELECT $1, c.rkey, c.tat, c.planned
    FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS c(rkey, tat, planned)
    ON CONFLICT (kind, rkey) DO UPDATE SET tat = excluded.tat, planned = excluded.planned
)
DELETE FROM {schema}.rate_keys
WHERE kind = $1 AND tat <= $5 AND planned <= $5 AND rkey <> ALL ($2::text[])";

/// The kind `$1`'s overrides per key.
pub(crate) const OVERRIDES: &str = "
SELECT lkey, max, rate_limit, rate_period, rate_burst FROM {schema}.limit_overrides
WHERE kind = $1";

/// Moves throttled tasks (`$1` seqs) to when they may start (`$2`, µs since the epoch) and
/// says why on their timelines (`$3` now, `$4` the reasons).
const THROTTLE: &str = "
WITH moved AS (
    UPDATE {schema}.tasks AS t
    SET run_at = timestamptz 'epoch' + c.until * interval '1 microsecond', updated_at = $3
    FROM unnest($1::bigint[], $2::bigint[], $4::text[]) AS c(seq, until, reason)
    WHERE t.seq = c.seq
    RETURNING t.id, c.reason
)
INSERT INTO {schema}.events (task_id, type, at, reason)
SELECT id, 'rate_limited', $3, reason FROM moved";

/// Claims and starts up to `min(limit, start)` tasks of `p.kind` whose keys have a free slot
/// and whose rate allows a start now; moves the due tasks whose rate does not to when it will.
pub(crate) async fn claim(
    db: &Db,
    p: &ClaimParams,
    limit: &PerKey,
) -> Result<Vec<ClaimedTask>, StoreError> {
    if p.limit.min(p.start) == 0 {
        return Ok(Vec::new());
    }
    let began = std::time::Instant::now();
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    let claimed = claim_in(db, &mut tx, p, limit, began).await?;
    tx.commit().await.map_err(db_err)?;
    Ok(claimed)
}

/// The same claim in the open transaction `tx` (its own, or a completion's after its
/// outcomes); `began` is when the caller began, as the rate counts it. The kind's lock is held
/// until `tx` ends.
pub(crate) async fn claim_in(
    db: &Db,
    tx: &mut PgConnection,
    p: &ClaimParams,
    limit: &PerKey,
    began: std::time::Instant,
) -> Result<Vec<ClaimedTask>, StoreError> {
    let mut want = p.limit.min(p.start);
    if want == 0 {
        return Ok(Vec::new());
    }
    sqlx::query(LOCK)
        .bind(db.schema.name())
        .bind(&p.kind)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    if let Some(host) = &limit.host {
        // After the kind's own lock, always in this order: no two claims wait on each other.
        sqlx::query(LOCK)
            .bind(db.schema.name())
            .bind(host.lock_name())
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        let (running,): (i64,) = sqlx::query_as(db.schema.sql(HOST_RUNNING))
            .bind(&host.kinds)
            .bind(Time(p.now))
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        want = want.min(host.free(running.max(0) as u64));
        if want == 0 {
            return Ok(Vec::new());
        }
    }
    let now_us = rate_clock(p.now, began.elapsed());
    let running: Vec<(String, i64)> = match limit.concurrency {
        Some(_) => sqlx::query_as(db.schema.sql(RUNNING_KEYS))
            .bind(&p.kind)
            .bind(Time(p.now))
            .fetch_all(&mut *tx)
            .await
            .map_err(db_err)?,
        None => Vec::new(),
    };
    let running = running
        .into_iter()
        .map(|(k, n)| (k, u32::try_from(n).unwrap_or(u32::MAX)));
    type OverrideRow = (String, Option<i64>, Option<i64>, Option<i64>, Option<i64>);
    let overrides: Vec<OverrideRow> = sqlx::query_as(db.schema.sql(OVERRIDES))
        .bind(&p.kind)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    let rates: Vec<(String, i64, i64)> = match limit.rate {
        Some(_) => sqlx::query_as(db.schema.sql(RATES))
            .bind(&p.kind)
            .bind(now_us)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_err)?,
        None => Vec::new(),
    };
    let mut admission = Admission::new(limit, now_us, running)
        .overrides(
            overrides
                .into_iter()
                .map(|(k, max, l, per, b)| (k, KeyOverride::from_row(max, l, per, b))),
        )
        .rates(
            rates
                .into_iter()
                .map(|(k, tat_us, planned_us)| (k, RateState { tat_us, planned_us })),
        );
    let mut cursor: Option<(Timestamp, i64)> = None;
    let (mut scanned, mut seqs, mut keys) = (0, Vec::new(), Vec::<Option<String>>::new());
    let mut throttled = Throttled::default();
    while seqs.len() < want && scanned < SCAN_BUDGET {
        let window = Admission::window(want, scanned);
        let q = match cursor {
            None => sqlx::query(db.schema.sql(PICK_FIRST)),
            Some(_) => sqlx::query(db.schema.sql(PICK_AFTER)),
        };
        let mut q = q
            .bind(&p.kind)
            .bind(Time(p.now))
            .bind(i64::try_from(window).unwrap_or(i64::MAX));
        if let Some((at, seq)) = cursor {
            q = q.bind(Time(at)).bind(seq);
        }
        let rows = q.fetch_all(&mut *tx).await.map_err(db_err)?;
        scanned += rows.len();
        for r in &rows {
            let seq: i64 = r.try_get("seq").map_err(db_err)?;
            let Time(at) = r.try_get("run_at").map_err(db_err)?;
            cursor = Some((at, seq));
            if seqs.len() == want {
                break;
            }
            let payload: &[u8] = r.try_get("payload").map_err(db_err)?;
            let verdict = admission.admit(payload);
            match verdict {
                Verdict::Start { lkey } => {
                    seqs.push(seq);
                    keys.push(lkey);
                }
                Verdict::Pass => {}
                Verdict::Throttled { until_us, .. } => {
                    throttled.seqs.push(seq);
                    throttled.until.push(until_us);
                    throttled.reasons.push(verdict.reason().unwrap_or_default());
                }
            }
        }
        if rows.len() < window {
            break;
        }
    }
    let rows = if seqs.is_empty() {
        Vec::new()
    } else {
        sqlx::query(db.schema.sql(START))
            .bind(&seqs)
            .bind(Time(p.now))
            .bind(&p.owner)
            .bind(Time(p.lease_until))
            .bind(keys.iter().map(Option::as_deref).bind_iter())
            .bind(i64::from(p.max_attempts))
            .bind(p.on_group_failure == OnFailure::Skip)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_err)?
    };
    if !throttled.seqs.is_empty() {
        sqlx::query(db.schema.sql(THROTTLE))
            .bind(&throttled.seqs)
            .bind(&throttled.until)
            .bind(Time(p.now))
            .bind(&throttled.reasons)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    if limit.rate.is_some() {
        let (mut rkeys, mut tats, mut planned) = (Vec::new(), Vec::new(), Vec::new());
        for (k, s) in admission.changed_rates() {
            rkeys.push(k);
            tats.push(s.tat_us);
            planned.push(s.planned_us);
        }
        sqlx::query(db.schema.sql(SAVE_RATES))
            .bind(&p.kind)
            .bind(&rkeys)
            .bind(&tats)
            .bind(&planned)
            .bind(now_us)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    claimed_rows(&rows, p)
}

/// The tasks a claim moves on for their keys' rates.
#[derive(Default)]
struct Throttled {
    seqs: Vec<i64>,
    until: Vec<i64>,
    reasons: Vec<String>,
}
