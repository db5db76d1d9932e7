-- The open-task index of groups keyed by a column that only an end clears, instead of naming
-- the status in its WHERE. SQLite rewrites a partial index's entry on every UPDATE that sets a
-- column its WHERE names, so each claim, start and retry of a grouped task deleted and
-- re-inserted the task's entry (its key two strings and a number) although the task stayed
-- open. `grp_live` is the task's group while it may hold it: written with `grp` when the task
-- is placed or runs again by hand, cleared by the statements that end it. It is a superset:
-- a path that leaves it set on an ended task costs a lookup one row read, never a wrong
-- answer, since every lookup still tests the row's status (`holds_its_group!` in
-- src/groups.rs). Filled once from the rows the old index held.
ALTER TABLE backstop_tasks ADD COLUMN grp_live TEXT;
UPDATE backstop_tasks SET grp_live = grp
    WHERE grp IS NOT NULL AND status <> 2 AND status <> 4;
DROP INDEX backstop_tasks_grp_open;
CREATE INDEX backstop_tasks_grp_open ON backstop_tasks (kind, grp_live, grp_seq)
    WHERE grp_live IS NOT NULL;
