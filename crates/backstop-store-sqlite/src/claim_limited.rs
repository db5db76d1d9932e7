//! The claim of a kind limited per key ([`backstop_core::limit`]): the keys of the kind's
//! running tasks with a live lease are counted, due tasks are read oldest first in windows,
//! and each is taken only while its key has a free slot; a full key's tasks are passed over
//! and the reading goes on (up to [`SCAN_BUDGET`] rows), so one busy key cannot starve the
//! others. Every task taken starts (none is held) and its key is written on its row. A kind
//! with a rate limit keeps each key's GCRA time in `backstop_rate_keys`; a due task whose key
//! may not start yet is moved to when it may, with a `rate_limited` event. The single writer
//! serialises these claims, as it does every write.

use crate::claim::{SHAPES, START_SET, lease_values, task_at};
use crate::raw::{Db, Row, Stmt, Value};
use crate::row::jiff_ms::to_ms;
use crate::shapes::chunks;
use backstop_core::StoreError;
use backstop_core::limit::{
    Admission, KeyOverride, PerKey, RateState, SCAN_BUDGET, Verdict, rate_clock,
};
use backstop_core::store::{ClaimParams, ClaimedTask};
use std::sync::LazyLock;

/// The keys of the kind's running tasks whose lease has not ended (`?2` now), with how many.
pub(crate) const RUNNING_KEYS: &str = "
SELECT lkey, count(*) FROM backstop_tasks INDEXED BY backstop_tasks_running_keys
WHERE status = 1 AND lkey IS NOT NULL AND kind = ?1 AND lease_until > ?2
GROUP BY lkey";

/// How many tasks of the kinds `?1` (a JSON array) are running with a live lease (`?2` now):
/// a host's count. The running tasks are few; the index of leases reads only them.
pub(crate) const HOST_RUNNING: &str = "
SELECT count(*) FROM backstop_tasks INDEXED BY backstop_tasks_leased
WHERE status = 1 AND lease_until > ?2 AND kind IN (SELECT value FROM json_each(?1))";

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

/// The start of a limited claim's tasks, one UPDATE per shape, each row's key written in the
/// same write (a second UPDATE per row to write it cost about a quarter of the drain): the
/// parameters of `claim::lease_sql`, then `?6`, `?7` the first row's seq and key, `?8`, `?9`
/// the next one's, and so on.
static START_KEYED: LazyLock<Vec<String>> = LazyLock::new(|| {
    SHAPES
        .iter()
        .map(|rows| {
            let cases: Vec<String> = (0..*rows)
                .map(|i| format!("WHEN ?{} THEN ?{}", 6 + 2 * i, 7 + 2 * i))
                .collect();
            let seqs: Vec<String> = (0..*rows).map(|i| format!("?{}", 6 + 2 * i)).collect();
            // OR FAIL: no statement journal; an error rolls the whole transaction back anyway.
            format!(
                "UPDATE OR FAIL backstop_tasks
                 SET {START_SET}, epoch = epoch + 1,
                     lease_owner = ?1, lease_until = ?2, updated_at = ?3,
                     max_attempts = CASE max_attempts WHEN 0 THEN ?4 ELSE max_attempts END,
                     grp_skip = ?5, lkey = CASE seq {} END
                 WHERE seq IN ({})",
                cases.join(" "),
                seqs.join(", ")
            )
        })
        .collect()
});

/// The kind's keys whose rate state is still in the future (`?2` now, in µs).
const RATES: &str = "
SELECT rkey, tat, planned FROM backstop_rate_keys
WHERE kind = ?1 AND (tat > ?2 OR planned > ?2)";

const SAVE_RATE: &str = "
INSERT INTO backstop_rate_keys (kind, rkey, tat, planned) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (kind, rkey) DO UPDATE SET tat = excluded.tat, planned = excluded.planned";

/// Rate state that means nothing any more (both times passed).
const FORGET_RATES: &str =
    "DELETE FROM backstop_rate_keys WHERE kind = ?1 AND tat <= ?2 AND planned <= ?2";

/// The kind's overrides per key.
pub(crate) const OVERRIDES: &str = "
SELECT lkey, max, rate_limit, rate_period, rate_burst FROM backstop_limit_overrides
WHERE kind = ?1";

/// Moves a throttled task (`?1` seq) to when it may start (`?2`, ms) and says why on its
/// timeline (`?3` now, `?4` the reason).
const THROTTLE: &str = "UPDATE backstop_tasks SET run_at = ?2, updated_at = ?3 WHERE seq = ?1";
const THROTTLED: &str = "
INSERT INTO backstop_events (task_id, type, at, reason)
SELECT id, 'rate_limited', ?2, ?3 FROM backstop_tasks WHERE seq = ?1";

/// Claims and starts up to `min(limit, start)` tasks of `p.kind` whose keys have a free slot
/// and whose rate allows a start now; moves the due tasks whose rate does not to when it will.
pub(crate) fn lease(
    db: &Db<'_>,
    p: &ClaimParams,
    limit: &PerKey,
    began: std::time::Instant,
) -> Result<Vec<ClaimedTask>, StoreError> {
    let mut want = p.limit.min(p.start);
    if want == 0 {
        return Ok(Vec::new());
    }
    let now = to_ms(p.now);
    if let Some(host) = &limit.host {
        let kinds = serde_json::to_string(&host.kinds).unwrap_or_default();
        let mut running = 0;
        db.prepare(HOST_RUNNING)?
            .query(&[kinds.as_str().into(), now.into()], |r| {
                running = r.int(0);
                Ok(())
            })?;
        want = want.min(host.free(running.max(0) as u64));
        if want == 0 {
            return Ok(Vec::new());
        }
    }
    let now_us = rate_clock(p.now, began.elapsed());
    let mut running = Vec::new();
    if limit.concurrency.is_some() {
        db.prepare(RUNNING_KEYS)?
            .query(&[p.kind.as_str().into(), now.into()], |r| {
                running.push((r.text(0)?.to_owned(), r.int(1) as u32));
                Ok(())
            })?;
    }
    let mut overrides = Vec::new();
    db.prepare(OVERRIDES)?
        .query(&[p.kind.as_str().into()], |r| {
            overrides.push((r.text(0)?.to_owned(), key_override(r)));
            Ok(())
        })?;
    let mut rates = Vec::new();
    if limit.rate.is_some() {
        db.prepare(RATES)?
            .query(&[p.kind.as_str().into(), now_us.into()], |r| {
                let state = RateState {
                    tat_us: r.int(1),
                    planned_us: r.int(2),
                };
                rates.push((r.text(0)?.to_owned(), state));
                Ok(())
            })?;
    }
    let mut admission = Admission::new(limit, now_us, running)
        .overrides(overrides)
        .rates(rates);
    let (mut cursor, mut scanned) = ((i64::MIN, i64::MIN), 0);
    let mut taken: Vec<(i64, Option<String>)> = Vec::new();
    let mut throttled: Vec<(i64, i64, String)> = Vec::new();
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
                if taken.len() == want {
                    return Ok(());
                }
                let verdict = admission.admit(r.blob(3));
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
                Ok(())
            },
        )?;
        scanned += read;
        if read < window {
            break;
        }
    }
    start_keyed(db, p, &taken)?;
    if !throttled.is_empty() {
        let (mut moved, mut said) = (db.prepare(THROTTLE)?, db.prepare(THROTTLED)?);
        for (seq, until, reason) in &throttled {
            moved.execute(&[Value::Int(*seq), Value::Int(*until), now.into()])?;
            said.execute(&[Value::Int(*seq), now.into(), reason.as_str().into()])?;
        }
    }
    if limit.rate.is_some() {
        let mut save = db.prepare(SAVE_RATE)?;
        for (key, s) in admission.changed_rates() {
            save.execute(&[
                p.kind.as_str().into(),
                key.into(),
                s.tat_us.into(),
                s.planned_us.into(),
            ])?;
        }
        db.prepare(FORGET_RATES)?
            .execute(&[p.kind.as_str().into(), now_us.into()])?;
    }
    Ok(claimed)
}

/// An override row's values (`max`, `rate_limit`, `rate_period` in ms, `rate_burst`, from
/// column 1).
fn key_override(r: &Row<'_>) -> KeyOverride {
    KeyOverride::from_row(r.opt_int(1), r.opt_int(2), r.opt_int(3), r.opt_int(4))
}

/// Starts the taken rows, writing each one's key.
fn start_keyed(
    db: &Db<'_>,
    p: &ClaimParams,
    taken: &[(i64, Option<String>)],
) -> Result<(), StoreError> {
    let mut statements: [Option<Stmt<'_>>; SHAPES.len()] = Default::default();
    let mut values = Vec::with_capacity(5 + 2 * SHAPES[0]);
    for (shape, chunk) in chunks(taken, SHAPES) {
        let start = match &mut statements[shape] {
            Some(s) => s,
            slot => slot.insert(db.prepare(&START_KEYED[shape])?),
        };
        values.clear();
        values.extend_from_slice(&lease_values(p));
        for (seq, key) in chunk {
            values.push(Value::Int(*seq));
            values.push(key.as_deref().into());
        }
        start.execute(&values)?;
    }
    Ok(())
}
