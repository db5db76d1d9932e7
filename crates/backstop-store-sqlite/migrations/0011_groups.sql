-- Ordering per group (issue 18; backstop_core::group has the design). Nullable columns and a
-- defaulted flag rewrite no rows; the pinned plans of the hot statements stay as they are.
--   grp            the task's group, NULL for most tasks
--   grp_seq        its place in the group: the order in which the group's inserts committed
--   grp_skip       1 when its kind skips failed tasks (written by every claim)
--   parked_run_at  non-NULL while parked behind an open task of its group: its own run_at,
--                  while run_at holds 9999-01-01 so that no claim, due count or overdue
--                  check meets it
ALTER TABLE backstop_tasks ADD COLUMN grp TEXT;
ALTER TABLE backstop_tasks ADD COLUMN grp_seq INTEGER;
ALTER TABLE backstop_tasks ADD COLUMN grp_skip INTEGER NOT NULL DEFAULT 0;
ALTER TABLE backstop_tasks ADD COLUMN parked_run_at INTEGER;

-- A group's open tasks (pending, running, failed) in group order: where its head is found.
CREATE INDEX backstop_tasks_grp_open ON backstop_tasks (kind, grp, grp_seq)
    WHERE grp IS NOT NULL AND status IN (0, 1, 3);

-- The next place of each group; nothing else is kept per group.
CREATE TABLE backstop_task_groups (
    kind     TEXT    NOT NULL,
    grp      TEXT    NOT NULL,
    next_seq INTEGER NOT NULL,
    PRIMARY KEY (kind, grp)
) WITHOUT ROWID;

-- Grouped rows that arrived without a place (an outbox INSERT with `grp`): empty but for
-- the moments between such an insert and the store's next claim or grouped enqueue, which
-- places them. The
-- store's own enqueue places its rows as it writes them, and unparks the head of a group
-- whenever a task of it ends, in its code (src/groups.rs): no trigger, since on SQLite any
-- trigger on this table costs every insert and status change of every task.
CREATE INDEX backstop_tasks_unplaced ON backstop_tasks (seq)
    WHERE grp IS NOT NULL AND grp_seq IS NULL;
