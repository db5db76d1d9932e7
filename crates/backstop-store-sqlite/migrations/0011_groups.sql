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

-- A grouped row that arrives without a place takes the next place of its group and, when an
-- open task of the group is there before it, is parked. A trigger, so that the outbox INSERT
-- with a `grp` column gets exactly what an enqueue gets; the store's own enqueue gives rows
-- their places before writing them, the same way in fewer statements (src/groups.rs).
-- SQLite has one writer: places follow commit order by themselves.
CREATE TRIGGER backstop_tasks_grp_insert AFTER INSERT ON backstop_tasks
WHEN NEW.grp IS NOT NULL AND NEW.grp_seq IS NULL
BEGIN
    -- Not INSERT OR IGNORE: a trigger's conflict clause gives way to its statement's (the
    -- store inserts OR FAIL), so the row is added only where it is missing.
    INSERT INTO backstop_task_groups (kind, grp, next_seq)
    SELECT NEW.kind, NEW.grp, 0 WHERE NOT EXISTS (
        SELECT 1 FROM backstop_task_groups WHERE kind = NEW.kind AND grp = NEW.grp);
    UPDATE backstop_task_groups SET next_seq = next_seq + 1 WHERE kind = NEW.kind AND grp = NEW.grp;
    UPDATE backstop_tasks
    SET grp_seq = (SELECT next_seq FROM backstop_task_groups
                   WHERE kind = NEW.kind AND grp = NEW.grp),
        parked_run_at = CASE WHEN NEW.status = 0 AND EXISTS (
            SELECT 1 FROM backstop_tasks AS o
            WHERE o.kind = NEW.kind AND o.grp = NEW.grp AND o.status IN (0, 1, 3)
              AND (o.status <> 3 OR o.grp_skip = 0) AND o.seq <> NEW.seq)
            THEN NEW.run_at END
    WHERE seq = NEW.seq;
    UPDATE backstop_tasks SET run_at = 253370764800000
    WHERE seq = NEW.seq AND parked_run_at IS NOT NULL;
END;

-- When a grouped task stops being open (succeeded, compensated, or failed when its kind
-- skips), its group's first open task is unparked if it is parked. Every path that ends a
-- task (completion, rescue, expiry, a manual resolve or cancel) goes through here.
CREATE TRIGGER backstop_tasks_grp_end AFTER UPDATE OF status ON backstop_tasks
WHEN NEW.grp IS NOT NULL AND NEW.status IN (2, 3, 4) AND OLD.status <> NEW.status
BEGIN
    -- A task that ends while parked (canceled, expired) is parked no longer.
    UPDATE backstop_tasks SET run_at = parked_run_at, parked_run_at = NULL
    WHERE seq = NEW.seq AND parked_run_at IS NOT NULL;
    UPDATE backstop_tasks SET run_at = parked_run_at, parked_run_at = NULL
    WHERE parked_run_at IS NOT NULL AND seq = (
        SELECT o.seq FROM backstop_tasks AS o
        WHERE o.kind = NEW.kind AND o.grp = NEW.grp AND o.status IN (0, 1, 3)
          AND (o.status <> 3 OR o.grp_skip = 0)
        ORDER BY o.grp_seq LIMIT 1);
END;
