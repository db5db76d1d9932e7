//! Ordering groups on SQLite (see `backstop_core::group`): places given at enqueue, and the
//! head of a group unparked whenever a task of it ends. All in the store's code, no trigger:
//! on SQLite a trigger on the tasks table costs every insert and every status change it could
//! fire for, before its WHEN is tested, grouped and ungrouped tasks alike: an insert measured
//! about 13 µs without one and 50 µs with one, a status change 15 and 30–35 µs (BENCHMARKS.md,
//! `bench/sqlite-triggers`).
//!
//! - An enqueue batch places its rows before writing them: one upsert for all its groups
//!   ([`TAKE_MANY`]) and one look for open tasks in those that existed before
//!   ([`OPEN_MANY`]); each row is written once, already placed (or parked).
//! - A row that arrives without a place (an outbox INSERT with `grp`, a callback's task) is
//!   placed by the next write that places or claims ([`place_unplaced`], in insert order),
//!   before anything else it does; until then no claim of the one writer has run, so nothing
//!   could have taken it out of order.
//! - Every path that ends tasks (completion, rescue, release, expiry, a manual resolve or
//!   cancel) runs [`PROMOTE_AFTER_RUN`] (a completion), [`PROMOTE_MOVED`] or
//!   [`PROMOTE_IDS`] on them in its own transaction.
//!
//! SQLite has one writer, so places given inside the write transaction follow commit order.

use crate::raw::{Db, Stmt, Value};
use backstop_core::NewTask;
use backstop_core::StoreError;
use std::sync::LazyLock;

/// A grouped row's place, given before it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    /// Its `grp_seq`.
    pub seq: i64,
    /// Whether an open task of its group is before it: then it is written parked.
    pub parked: bool,
}

/// The condition under which a task `o` of a group holds it: open (pending, running, or
/// failed where its kind blocks) and placed (rows are placed in insert order, so an unplaced
/// row is after every placed one). Open is two comparisons, never `IN (0, 1, 3)`: SQLite
/// builds a temporary b-tree for such a list each time it evaluates it (migration 0015).
///
/// A lookup finds the group's tasks by `o.grp_live`, the column the index
/// `backstop_tasks_grp_open` is keyed by (migration 0016): set while a task may hold its
/// group, cleared by the statements that end it, so that a claim or a retry, which change
/// only the status, leave the index alone. It may stay set on a task that ended by a rarer
/// path; this condition, read from the row, is what decides.
macro_rules! holds_its_group {
    () => {
        "o.status <> 2 AND o.status <> 4 AND (o.status <> 3 OR o.grp_skip = 0) \
         AND o.grp_seq IS NOT NULL"
    };
}

/// The first task holding the group of kind `$kind` and group `$grp` (SQL expressions): the
/// group's head.
macro_rules! head_of_group {
    ($kind:literal, $grp:literal) => {
        concat!(
            "SELECT o.seq FROM backstop_tasks AS o WHERE o.kind = ",
            $kind,
            " AND o.grp_live = ",
            $grp,
            " AND ",
            holds_its_group!(),
            " ORDER BY o.grp_seq LIMIT 1"
        )
    };
}
pub(crate) use holds_its_group;

/// What `grp_live` becomes when a statement sets a task's status to `$status` (an SQL
/// expression; `$t` qualifies the row's columns, `""` or `"t."`): kept while the task still
/// holds its group by [`holds_its_group!`] (pending, or failed where its kind blocks), cleared
/// otherwise. On a task of no group it sets NULL to NULL, which leaves the index alone.
macro_rules! grp_live_after {
    ($status:literal, $t:literal) => {
        concat!(
            "iif(",
            $status,
            " = 0 OR (",
            $status,
            " = 3 AND ",
            $t,
            "grp_skip = 0), ",
            $t,
            "grp_live, NULL)"
        )
    };
}
pub(crate) use grp_live_after;

/// Takes `n` places of a group at once; answers the last.
const TAKE: &str = "INSERT INTO backstop_task_groups (kind, grp, next_seq) VALUES (?1, ?2, ?3) \
     ON CONFLICT (kind, grp) DO UPDATE SET next_seq = next_seq + excluded.next_seq \
     RETURNING next_seq";

/// [`TAKE`] for every group of a batch in one statement: `?1` is a JSON array of
/// `[kind, group, n]`; answers each group's last place. One statement per batch rather than
/// one per group: SQLite gathers a statement's returned rows in a table of its own, which
/// costs each statement that returns anything a few microseconds.
pub(crate) const TAKE_MANY: &str = "INSERT INTO backstop_task_groups (kind, grp, next_seq) \
     SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2 FROM json_each(?1) AS j WHERE true \
     ON CONFLICT (kind, grp) DO UPDATE SET next_seq = next_seq + excluded.next_seq \
     RETURNING kind, grp, next_seq";

/// [`OPEN`] for many groups: `?1` is a JSON array of `[kind, group]`; answers the positions
/// in it of the groups some task holds.
pub(crate) const OPEN_MANY: &str = concat!(
    "SELECT j.key FROM json_each(?1) AS j WHERE EXISTS (SELECT 1 FROM backstop_tasks AS o \
     WHERE o.kind = j.value ->> 0 AND o.grp_live = j.value ->> 1 AND ",
    holds_its_group!(),
    ")"
);

/// Whether a task holds the group (then a new row is parked behind it).
const OPEN: &str = concat!(
    "SELECT EXISTS (SELECT 1 FROM backstop_tasks AS o WHERE o.kind = ?1 AND o.grp_live = ?2 AND ",
    holds_its_group!(),
    ")"
);

/// Unparks the first open task of the group if it is parked: a repeat of an existing key
/// takes a place without adding a row, so a row placed behind it may have nothing open
/// before it after all.
const HEAL: &str = concat!(
    "UPDATE backstop_tasks SET run_at = parked_run_at, parked_run_at = NULL \
     WHERE parked_run_at IS NOT NULL AND seq = (",
    head_of_group!("?1", "?2"),
    ")"
);

/// The place of each task of `tasks` (`None` for a task of no group), in batch order.
///
/// The batch's grouped tasks are sorted by group (then by position, so that each group's keep
/// batch order) rather than gathered in hash maps: a batch of a thousand groups built three
/// maps and two strings per group, and growing the maps alone was an eighth of a grouped
/// enqueue's time.
pub(crate) fn place(
    db: &Db<'_>,
    tasks: &[(&NewTask, i64)],
) -> Result<Vec<Option<Place>>, StoreError> {
    let mut order: Vec<(Group<'_>, usize)> = tasks
        .iter()
        .enumerate()
        .filter_map(|(i, (t, _))| Some(((t.kind.as_str(), t.group.as_deref()?), i)))
        .collect();
    let mut places = vec![None; tasks.len()];
    if order.is_empty() {
        return Ok(places);
    }
    order.sort_unstable();
    // Each group once, in that order, with how many places it needs.
    let mut groups: Vec<(Group<'_>, i64)> = Vec::new();
    for &(g, _) in &order {
        match groups.last_mut() {
            Some((last, n)) if *last == g => *n += 1,
            _ => groups.push((g, 1)),
        }
    }
    // Rows committed before this batch (outbox inserts) take their places first.
    place_unplaced(db)?;
    let firsts = take_many(db, &groups)?;
    let mut rest = order.as_slice();
    for (&(_, n), (mut seq, mut opened)) in groups.iter().zip(firsts) {
        let (mine, after) = rest.split_at(n as usize);
        rest = after;
        for &(_, i) in mine {
            let status = tasks[i].0.intake.status();
            places[i] = Some(Place {
                seq,
                parked: opened && status == backstop_core::Status::Pending,
            });
            seq += 1;
            // A pending task holds the group, and so does a dead letter at once (a failed
            // task blocks until the claim that learns its kind's choice says otherwise).
            opened |= matches!(
                status,
                backstop_core::Status::Pending | backstop_core::Status::Failed
            );
        }
    }
    Ok(places)
}

/// Whether any task was ever placed in a group: until then no task has a group to unpark in
/// (every grouped task is placed, and its group's row made, before it can be claimed).
pub(crate) fn any(db: &Db<'_>) -> Result<bool, StoreError> {
    let mut any = false;
    db.prepare("SELECT EXISTS (SELECT 1 FROM backstop_task_groups)")?
        .query(&[], |r| {
            any = r.int(0) != 0;
            Ok(())
        })?;
    Ok(any)
}

/// A group: its kind and name.
type Group<'t> = (&'t str, &'t str);

/// Takes the places of a batch's groups (`groups`: sorted, each once, with how many places it
/// needs) in two statements: answers, in the same order, each group's first place and whether
/// a task holding the group is before it. A group whose first place is 1 was new: nothing can
/// be before it, and it is not looked for.
fn take_many(db: &Db<'_>, groups: &[(Group<'_>, i64)]) -> Result<Vec<(i64, bool)>, StoreError> {
    let wanted: Vec<(&str, &str, i64)> = groups.iter().map(|&((k, g), n)| (k, g, n)).collect();
    let list = serde_json::to_string(&wanted).map_err(list_error)?;
    let mut placed: Vec<(i64, bool)> = vec![(0, false); groups.len()];
    let mut answered = 0;
    db.prepare(TAKE_MANY)?.query(&[list.as_str().into()], |r| {
        let group = (r.text(0)?, r.text(1)?);
        let at = groups
            .binary_search_by(|(g, _)| g.cmp(&group))
            .map_err(|_| StoreError::Database("taking places answered another group".into()))?;
        // The last place taken; the batch's are the `n` up to it.
        placed[at].0 = r.int(2) - groups[at].1 + 1;
        answered += 1;
        Ok(())
    })?;
    if answered != groups.len() {
        return Err(StoreError::Database(
            "taking a group's places answered no row".into(),
        ));
    }
    // The positions in `groups` of those that existed before this batch.
    let older: Vec<usize> = (0..groups.len()).filter(|&i| placed[i].0 > 1).collect();
    if !older.is_empty() {
        let listed: Vec<Group<'_>> = older.iter().map(|&i| groups[i].0).collect();
        let list = serde_json::to_string(&listed).map_err(list_error)?;
        db.prepare(OPEN_MANY)?.query(&[list.as_str().into()], |r| {
            if let Some(&i) = usize::try_from(r.int(0)).ok().and_then(|k| older.get(k)) {
                placed[i].1 = true;
            }
            Ok(())
        })?;
    }
    Ok(placed)
}

/// A batch's groups could not be listed as JSON (not expected of strings and numbers).
fn list_error(e: serde_json::Error) -> StoreError {
    StoreError::Database(backstop_core::Cause::with_context(
        "listing a batch's groups",
        e,
    ))
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

/// Unparks, for each listed task that has a group: the task itself if it ended while parked
/// (canceled, expired; only when `itself`), and the first open task of its group if that one
/// is parked. `task` joins a listed element `j` to its row `t`.
fn promote_sql(task: &str, itself: bool) -> String {
    let ended_parked = if itself {
        format!(
            "SELECT t.seq FROM json_each(?1) AS j JOIN backstop_tasks AS t ON {task}
             WHERE t.grp IS NOT NULL AND t.status <> 0
             UNION ALL "
        )
    } else {
        String::new()
    };
    format!(
        "UPDATE backstop_tasks SET run_at = parked_run_at, parked_run_at = NULL
         WHERE parked_run_at IS NOT NULL AND seq IN (
             {ended_parked}SELECT ({head})
             FROM json_each(?1) AS j JOIN backstop_tasks AS t ON {task}
             WHERE t.grp IS NOT NULL)",
        head = head_of_group!("t.kind", "t.grp"),
    )
}

/// A listed task id in hex joined to its row.
const BY_ID: &str = "t.id = unhex(j.value)";

/// [`promote_sql`] for tasks that ended while running (a completion's, ids in hex): such a
/// task was never parked itself, so only its group's head is looked for, one pass over the
/// list instead of two.
pub(crate) static PROMOTE_AFTER_RUN: LazyLock<String> = LazyLock::new(|| promote_sql(BY_ID, false));

/// [`promote_sql`] over a JSON array of moves `{"seq": …}` (`lease::MOVE`'s list).
pub(crate) static PROMOTE_MOVED: LazyLock<String> =
    LazyLock::new(|| promote_sql("t.seq = j.value ->> 'seq'", true));

/// [`promote_sql`] over a JSON array of task ids in hex.
pub(crate) static PROMOTE_IDS: LazyLock<String> = LazyLock::new(|| promote_sql(BY_ID, true));

/// Grouped rows that arrived without a place, in insert order.
const UNPLACED: &str = "SELECT seq, kind, grp, status FROM backstop_tasks \
     WHERE grp IS NOT NULL AND grp_seq IS NULL ORDER BY seq";

/// Gives one row its place (and its group as the one it may hold) and parks it when `?3` (an
/// open task is before it).
const SET_PLACE: &str = "UPDATE backstop_tasks SET grp_seq = ?2, grp_live = grp, \
     parked_run_at = iif(?3, run_at, NULL), run_at = iif(?3, 253370764800000, run_at) \
     WHERE seq = ?1";

/// Places every grouped row that arrived without a place (see the module doc). Cheap when
/// there is none: one look into an index that holds only such rows.
pub(crate) fn place_unplaced(db: &Db<'_>) -> Result<(), StoreError> {
    let mut rows: Vec<(i64, String, String, i64)> = Vec::new();
    db.prepare(UNPLACED)?.query(&[], |r| {
        rows.push((
            r.int(0),
            r.text(1)?.to_owned(),
            r.text(2)?.to_owned(),
            r.int(3),
        ));
        Ok(())
    })?;
    if rows.is_empty() {
        return Ok(());
    }
    let (mut take, mut open, mut set) =
        (db.prepare(TAKE)?, db.prepare(OPEN)?, db.prepare(SET_PLACE)?);
    for (seq, kind, grp, status) in &rows {
        let place = one_int(
            &mut take,
            &[kind.as_str().into(), grp.as_str().into(), Value::Int(1)],
        )?;
        let opened = one_int(&mut open, &[kind.as_str().into(), grp.as_str().into()])?;
        let parked = opened != 0 && *status == 0;
        set.execute(&[
            Value::Int(*seq),
            Value::Int(place),
            Value::Int(i64::from(parked)),
        ])?;
    }
    Ok(())
}

/// The ids of `ids` as the JSON array [`PROMOTE_IDS`] reads.
pub(crate) fn ids_json<'a>(ids: impl IntoIterator<Item = &'a backstop_core::TaskId>) -> String {
    let hex: Vec<String> = ids.into_iter().map(crate::lease::hex_id).collect();
    serde_json::to_string(&hex).unwrap_or_else(|_| "[]".into())
}
