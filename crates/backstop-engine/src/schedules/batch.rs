//! One planning pass over a batch of schedules: those due at one instant, planned together.
//! Their progress is read in one call and their last ticks per kind in batches
//! ([`super::last_ticks`]); each is planned in memory
//! ([`backstop_core::schedule::plan`]); then, chunk by chunk, the chunk's rows are written
//! in one enqueue and its schedules' progress in one fenced call (one transaction), each
//! schedule's fenced by where its pass started.
//!
//! Rows first, progress second: a crash between them leaves rows whose instants the next
//! pass plans again, and those are repeats (same key, same payload), never second rows.

use super::clock::Moving;
use super::last_ticks;
use super::outcome::{PassReport, outcome};
use super::tick_task::tick_task;
use crate::context::Context;
use crate::enqueue::enqueue_tasks;
use backstop_core::StoreError;
use backstop_core::schedule::{Plan, Progress, Schedule, plan};
use backstop_core::store::{AdvanceScheduleParams, SchedulesParams};
use jiff::Timestamp;
use std::collections::HashMap;
use std::ops::Range;

/// Rows one chunk writes at most (a pass with no row counts as one: its progress is still
/// written). One pass writes at most `ROWS_PER_PASS` (1,000) rows, so it fits in a chunk.
const CHUNK: usize = 1_000;

/// A schedule's pass, decided: where it started, and its plan.
struct Decided {
    expected: Option<Timestamp>,
    plan: Plan,
}

/// Plans each of `due` (distinct schedules) up to now by `clock`: one result per schedule,
/// in order. A read that fails fails them all; a write, the schedules of its chunk.
pub(crate) async fn pass_batch(
    ctx: &Context,
    due: &[&Schedule],
    clock: Moving,
) -> Vec<Result<PassReport, StoreError>> {
    if due.is_empty() {
        return Vec::new();
    }
    let decided = match decide(ctx, due, &clock).await {
        Ok(d) => d,
        Err(e) => return due.iter().map(|_| Err(e.replicate())).collect(),
    };
    let weights: Vec<usize> = decided.iter().map(|d| d.plan.ticks.len()).collect();
    let mut out = Vec::with_capacity(due.len());
    for r in chunks(&weights, CHUNK) {
        out.extend(write(ctx, &due[r.clone()], &decided[r], clock.now()).await);
    }
    out
}

/// Reads the batch's progress and last ticks and plans each schedule.
async fn decide(
    ctx: &Context,
    due: &[&Schedule],
    clock: &Moving,
) -> Result<Vec<Decided>, StoreError> {
    let names = due.iter().map(|s| s.name.clone()).collect();
    let mut stored: HashMap<String, Progress> = ctx
        .store
        .schedules(SchedulesParams { names: Some(names) })
        .await?
        .into_iter()
        .map(|r| (r.name, r.progress))
        .collect();
    let progress: Vec<Progress> = due
        .iter()
        .map(|s| stored.remove(&s.name).unwrap_or_default())
        .collect();
    let batch: Vec<(&Schedule, &Progress)> = due.iter().copied().zip(&progress).collect();
    let lasts = last_ticks::read(ctx, &batch).await?;
    let now = clock.now();
    Ok(batch
        .into_iter()
        .map(|(s, p)| {
            let last = last_ticks::needed(s, p).and_then(|id| lasts.get(&id).copied());
            Decided {
                expected: p.planned_until,
                plan: plan(s, p, last, now),
            }
        })
        .collect())
}

/// Writes one chunk at `now`: its rows in one enqueue, then its progress in one call.
async fn write(
    ctx: &Context,
    due: &[&Schedule],
    decided: &[Decided],
    now: Timestamp,
) -> Vec<Result<PassReport, StoreError>> {
    let fail = |e: StoreError| due.iter().map(|_| Err(e.replicate())).collect();
    let tasks: Vec<_> = due
        .iter()
        .zip(decided)
        .flat_map(|(s, d)| d.plan.ticks.iter().map(|t| tick_task(ctx, s, t)))
        .collect();
    let n = tasks.len();
    let results = match enqueue_tasks(ctx, tasks, now).await {
        Ok(r) if r.len() == n => r,
        Ok(r) => {
            let e = format!("the store answered {} of {n} ticks", r.len());
            return fail(StoreError::Database(e.into()));
        }
        Err(e) => return fail(e),
    };
    let mut rows = results.as_slice();
    let (mut reports, mut items) = (Vec::new(), Vec::new());
    for (s, d) in due.iter().zip(decided) {
        let (mine, rest) = rows.split_at(d.plan.ticks.len());
        rows = rest;
        let o = outcome(ctx, s, &d.plan, mine);
        items.push(AdvanceScheduleParams {
            name: s.name.clone(),
            expected: d.expected,
            progress: o.progress,
            add_missed: o.missed,
            add_overlapped: o.overlapped,
            now,
        });
        reports.push(o.report);
    }
    match ctx.store.advance_schedules(items).await {
        Ok(written) if written.len() == reports.len() => reports
            .into_iter()
            .zip(written)
            .map(|(mut r, advanced)| {
                r.advanced = advanced;
                Ok(r)
            })
            .collect(),
        Ok(written) => {
            let e = format!(
                "the store answered {} of {} advances",
                written.len(),
                due.len()
            );
            fail(StoreError::Database(e.into()))
        }
        Err(e) => fail(e),
    }
}

/// Cuts passes of `weights` rows each into consecutive chunks of at most `limit` rows (a pass
/// with no row counts as one; a pass heavier than `limit` is a chunk alone).
fn chunks(weights: &[usize], limit: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut rows) = (0, 0);
    for (i, w) in weights.iter().map(|w| (*w).max(1)).enumerate() {
        if i > start && rows + w > limit {
            out.push(start..i);
            (start, rows) = (i, 0);
        }
        rows += w;
    }
    if start < weights.len() {
        out.push(start..weights.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_hold_at_most_the_limit_and_every_pass_once() {
        assert_eq!(chunks(&[], 3), Vec::<Range<usize>>::new());
        assert_eq!(chunks(&[0, 0, 0, 0], 3), [0..3, 3..4]);
        assert_eq!(chunks(&[1, 2, 1], 3), [0..2, 2..3]);
        assert_eq!(chunks(&[5, 0, 2, 3], 3), [0..1, 1..3, 3..4]);
        assert_eq!(chunks(&[1; 10_000], CHUNK).len(), 10);
    }
}
