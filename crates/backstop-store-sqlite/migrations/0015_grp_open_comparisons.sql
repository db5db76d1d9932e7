-- The open-task index of groups, with its status test written as comparisons. SQLite codes
-- `status IN (0, 1, 3)` (a list of three or more) as a temporary b-tree built afresh each time
-- a statement evaluates it, and every UPDATE that sets the status of a grouped task evaluates
-- the index's WHERE for the old and the new row: a claim, a start or a completion of a grouped
-- task took 5.1 µs where 2.1 µs do with the comparisons below (BENCHMARKS.md). The same tasks,
-- the same order; rebuilt once, from the grouped rows.
DROP INDEX backstop_tasks_grp_open;
CREATE INDEX backstop_tasks_grp_open ON backstop_tasks (kind, grp, grp_seq)
    WHERE grp IS NOT NULL AND status <> 2 AND status <> 4;
