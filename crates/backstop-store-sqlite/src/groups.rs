//! Places in ordering groups, given by the store's own enqueue (see `backstop_core::group`).
//!
//! Migration 11's insert trigger places a grouped row that arrives without a place (an
//! outbox INSERT, a callback's task), one row at a time: three statements on the groups
//! table and two rewrites of the new row. An enqueue batch places its rows here instead,
//! before they are written: one upsert and one look for an open task per group of the batch,
//! and each row written once, already placed (or parked). Measured on 50,000 tasks in 10,000
//! groups, this takes the insert from about four times the cost of an ungrouped one to about
//! the same (BENCHMARKS.md).
//!
//! SQLite has one writer, so places given inside the write transaction follow commit order
//! as the trigger's do.

use crate::raw::{Db, Stmt, Value};
use backstop_core::NewTask;
use backstop_core::StoreError;
use std::collections::HashMap;

/// A grouped row's place, given before it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    /// Its `grp_seq`.
    pub seq: i64,
    /// Whether an open task of its group is before it: then it is written parked.
    pub parked: bool,
}

/// Takes `n` places of a group at once; answers the last.
const TAKE: &str = "INSERT INTO backstop_task_groups (kind, grp, next_seq) VALUES (?1, ?2, ?3) \
     ON CONFLICT (kind, grp) DO UPDATE SET next_seq = next_seq + excluded.next_seq \
     RETURNING next_seq";

/// Whether the group has an open task: pending, running, or failed where its kind blocks.
const OPEN: &str = "SELECT EXISTS (SELECT 1 FROM backstop_tasks AS o \
     WHERE o.kind = ?1 AND o.grp = ?2 AND o.status IN (0, 1, 3) \
       AND (o.status <> 3 OR o.grp_skip = 0))";

/// Unparks the first open task of the group if it is parked: a repeat of an existing key
/// takes a place without adding a row, so a row placed behind it may have nothing open
/// before it after all.
const HEAL: &str = "UPDATE backstop_tasks SET run_at = parked_run_at, parked_run_at = NULL \
     WHERE parked_run_at IS NOT NULL AND seq = ( \
       SELECT o.seq FROM backstop_tasks AS o \
       WHERE o.kind = ?1 AND o.grp = ?2 AND o.status IN (0, 1, 3) \
         AND (o.status <> 3 OR o.grp_skip = 0) \
       ORDER BY o.grp_seq LIMIT 1)";

/// The place of each task of `tasks` (`None` for a task of no group), in batch order.
pub(crate) fn place(
    db: &Db<'_>,
    tasks: &[(&NewTask, i64)],
) -> Result<Vec<Option<Place>>, StoreError> {
    let mut count: HashMap<(&str, &str), i64> = HashMap::new();
    for (t, _) in tasks {
        if let Some(g) = &t.group {
            *count.entry((t.kind.as_str(), g.as_str())).or_default() += 1;
        }
    }
    if count.is_empty() {
        return Ok(vec![None; tasks.len()]);
    }
    let (mut take, mut open) = (db.prepare(TAKE)?, db.prepare(OPEN)?);
    // Per group: the next place to give and whether an open task is before it.
    let mut next: HashMap<(&str, &str), (i64, bool)> = HashMap::with_capacity(count.len());
    for (&(kind, grp), &n) in &count {
        let last = one_int(&mut take, &[kind.into(), grp.into(), Value::Int(n)])?;
        let opened = one_int(&mut open, &[kind.into(), grp.into()])? != 0;
        next.insert((kind, grp), (last - n + 1, opened));
    }
    Ok(tasks
        .iter()
        .map(|(t, _)| {
            let g = t.group.as_deref()?;
            let (seq, opened) = next.get_mut(&(t.kind.as_str(), g))?;
            let status = t.intake.status();
            let place = Place {
                seq: *seq,
                parked: *opened && status == backstop_core::Status::Pending,
            };
            *seq += 1;
            // A pending task holds the group, and so does a dead letter at once (a failed
            // task blocks until the claim that learns its kind's choice says otherwise).
            *opened |= matches!(
                status,
                backstop_core::Status::Pending | backstop_core::Status::Failed
            );
            Some(place)
        })
        .collect())
}

/// After a batch in which some grouped tasks were repeats of existing keys: unparks the head
/// of each of their groups if it was parked behind a row that was never added.
pub(crate) fn heal<'t>(
    db: &Db<'_>,
    groups: impl IntoIterator<Item = (&'t str, &'t str)>,
) -> Result<(), StoreError> {
    let mut heal: Option<Stmt<'_>> = None;
    for (kind, grp) in groups {
        let s = match &mut heal {
            Some(s) => s,
            slot => slot.insert(db.prepare(HEAL)?),
        };
        s.execute(&[kind.into(), grp.into()])?;
    }
    Ok(())
}

fn one_int(s: &mut Stmt<'_>, values: &[Value<'_>]) -> Result<i64, StoreError> {
    let mut v = None;
    s.query(values, |row| {
        v = Some(row.int(0));
        Ok(())
    })?;
    v.ok_or_else(|| StoreError::Database("a group statement answered no row".into()))
}
