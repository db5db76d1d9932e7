//! Ordering per group, the store's half ([`backstop_core::group`] has the design; the insert
//! trigger of migration 11 numbers and parks new rows): promotion when grouped tasks end, and
//! the read of a group's head.
//!
//! MySQL triggers cannot change the table that fired them, so every path that ends tasks
//! (completion, rescue, release, expiry, a manual resolve or cancel) promotes in its own
//! transaction: it reads each row's group along with the row it locks, locks the rows of
//! `{task_groups}` of the groups whose open task ends (in key order) **before** it changes
//! the tasks, and once they are changed unparks each group's first open task if it is parked.
//! Holding a group's row means every insert into the group has committed or waits for it, and
//! the head is read by a statement after the lock: at READ COMMITTED it sees them all.
//!
//! Deadlocks: an insert into a group holds the group's row and then reads the group's open
//! tasks, a locking read that may wait for a task row an ender holds. So an ender that holds
//! task rows never waits for a group: it asks for the group's row with `NOWAIT`, and when
//! another transaction has it, the try ends at once ([`Fail::Relock`]) and the next one
//! locks that group first, waiting, before any task row ([`GroupLocks::begin`]).
//!
//! A task of no group pays nothing here: its `grp` is read with its row, and no group, no
//! statement.

use crate::Db;
use crate::row::{TASK_COLUMNS, col, task};
use crate::shapes::{padded_lists, repeat};
use crate::tx::{Fail, db_err, not_granted};
use backstop_core::store::GroupHeadParams;
use backstop_core::{Status, StoreError, Task};
use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};
use std::collections::BTreeSet;

/// Where a group's first open task is: one dive into the `grp_open` index. Binds: kind, group.
const FIRST_OPEN: &str = "FROM {tasks} FORCE INDEX (grp_open)
    WHERE kind = ? AND grp = ? AND grp_open_seq IS NOT NULL ORDER BY grp_open_seq LIMIT 1";

/// The groups' rows, locked until the commit, in key order. Binds per group: kind, group.
const LOCK: &str = "SELECT next_seq FROM {task_groups} WHERE ";
const GROUP: &str = "(kind = ? AND grp = ?)";

/// A parked head, unparked: due at its own time again. Binds: the `seq` list.
const UNPARK: &str = "UPDATE {tasks} SET run_at = parked_run_at, parked_run_at = NULL
    WHERE parked_run_at IS NOT NULL AND seq IN ";

/// A task's group as read with its row: kind, group, and whether its kind skips failures.
pub(crate) struct Member {
    kind: Vec<u8>,
    grp: Vec<u8>,
    skip: bool,
}

impl Member {
    /// The group's name (stored as the UTF-8 it was written as).
    pub(crate) fn name(&self) -> String {
        String::from_utf8_lossy(&self.grp).into_owned()
    }
}

/// The group of the task on `r` (columns `kind`, `grp`, `grp_skip`), if it has one.
pub(crate) fn member(r: &MySqlRow) -> Result<Option<Member>, StoreError> {
    let Some(grp) = col::<Option<Vec<u8>>, _>(r, "grp")? else {
        return Ok(None);
    };
    Ok(Some(Member {
        kind: col(r, "kind")?,
        grp,
        skip: col::<i8, _>(r, "grp_skip")? != 0,
    }))
}

/// Whether a grouped task that moves to `to` stops being open (see [`backstop_core::group`]).
fn ends(to: Status, skip: bool) -> bool {
    match to {
        Status::Succeeded | Status::Compensated => true,
        Status::Failed => skip,
        Status::Pending | Status::Running => false,
    }
}

/// The groups whose open tasks end in one transaction, sorted by (kind, group): the order in
/// which they are locked.
#[derive(Default)]
pub(crate) struct Ending(BTreeSet<(Vec<u8>, Vec<u8>)>);

impl Ending {
    /// Notes a task of `member`'s group that moves to `to`.
    pub(crate) fn note(&mut self, member: Option<&Member>, to: Status) {
        if let Some(m) = member.filter(|m| ends(to, m.skip)) {
            self.0.insert((m.kind.clone(), m.grp.clone()));
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `other`'s groups.
    pub(crate) fn extend(&mut self, other: Ending) {
        self.0.extend(other.0);
    }

    /// Locks the groups' rows, in key order; without waiting when `nowait`.
    async fn lock(&self, db: &Db, conn: &mut MySqlConnection, nowait: bool) -> sqlx::Result<()> {
        let groups: Vec<&(Vec<u8>, Vec<u8>)> = self.0.iter().collect();
        let tail = if nowait {
            " FOR UPDATE NOWAIT"
        } else {
            " FOR UPDATE"
        };
        for list in padded_lists(&groups) {
            let sql = format!("{LOCK}{}{tail}", repeat(GROUP, " OR ", list.len()));
            let mut q = sqlx::query(db.tables.q(&sql));
            for (kind, grp) in list {
                q = q.bind(kind.as_slice()).bind(grp.as_slice());
            }
            q.fetch_all(&mut *conn).await?;
        }
        Ok(())
    }

    /// Unparks the first open task of each group, where it is parked; in the transaction that
    /// ended the groups' tasks, after [`GroupLocks::take`] and after the tasks changed.
    pub(crate) async fn promote(&self, db: &Db, conn: &mut MySqlConnection) -> sqlx::Result<()> {
        let groups: Vec<&(Vec<u8>, Vec<u8>)> = self.0.iter().collect();
        let mut parked = Vec::new();
        for list in padded_lists(&groups) {
            let head = format!("(SELECT seq, parked_run_at {FIRST_OPEN})");
            let sql = repeat(&head, " UNION ALL ", list.len());
            let mut q = sqlx::query(db.tables.q(&sql));
            for (kind, grp) in list {
                q = q.bind(kind.as_slice()).bind(grp.as_slice());
            }
            for r in q.fetch_all(&mut *conn).await? {
                if r.try_get::<Option<i64>, _>("parked_run_at")?.is_some() {
                    parked.push(r.try_get::<i64, _>("seq")?);
                }
            }
        }
        parked.sort_unstable();
        parked.dedup();
        for list in padded_lists(&parked) {
            let sql = format!("{UNPARK}({})", repeat("?", ", ", list.len()));
            let mut q = sqlx::query(db.tables.q(&sql));
            for seq in list {
                q = q.bind(seq);
            }
            q.execute(&mut *conn).await?;
        }
        Ok(())
    }
}

/// The groups' rows one transaction that ends tasks locks, over its tries.
#[derive(Default)]
pub(crate) struct GroupLocks {
    /// The groups earlier tries found taken: locked first.
    learnt: Ending,
    /// Those locked by this try.
    held: BTreeSet<(Vec<u8>, Vec<u8>)>,
}

impl GroupLocks {
    /// Starts a try: locks the groups earlier tries found taken, waiting for them, before any
    /// task row. Nothing at all on a first try.
    pub(crate) async fn begin(&mut self, db: &Db, conn: &mut MySqlConnection) -> Result<(), Fail> {
        self.held.clear();
        if !self.learnt.is_empty() {
            self.learnt.lock(db, conn, false).await?;
            self.held.extend(self.learnt.0.iter().cloned());
        }
        Ok(())
    }

    /// Locks the groups of `ending` not locked yet, once their tasks' rows are locked and
    /// before those change, without waiting: a group another transaction holds ends the try
    /// ([`Fail::Relock`]), and the next one begins with it.
    pub(crate) async fn take(
        &mut self,
        db: &Db,
        conn: &mut MySqlConnection,
        ending: &Ending,
    ) -> Result<(), Fail> {
        let new = Ending(ending.0.difference(&self.held).cloned().collect());
        if new.is_empty() {
            return Ok(());
        }
        match new.lock(db, conn, true).await {
            Ok(()) => {
                self.held.extend(new.0);
                Ok(())
            }
            Err(e) if not_granted(&e) => {
                self.learnt.0.extend(new.0);
                Err(Fail::Relock(e))
            }
            Err(e) => Err(Fail::Sql(e)),
        }
    }
}

/// The task a group waits for: its first open task, or `None` when every task ended.
pub(crate) async fn head(db: &Db, p: &GroupHeadParams) -> Result<Option<Task>, StoreError> {
    let sql = format!("SELECT {TASK_COLUMNS} {FIRST_OPEN}");
    sqlx::query(db.tables.q(&sql))
        .bind(p.kind.as_str())
        .bind(p.group.as_str())
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(task)
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grouped_task_ends_for_its_group_when_it_stops_being_open() {
        assert!(ends(Status::Succeeded, false) && ends(Status::Compensated, false));
        assert!(ends(Status::Failed, true), "a failure its kind skips");
        assert!(!ends(Status::Failed, false), "a failure holds its group");
        assert!(!ends(Status::Pending, true) && !ends(Status::Running, true));
    }
}
