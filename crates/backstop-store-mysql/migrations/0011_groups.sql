-- Ordering per group (issue 18; backstop_core::group has the design). Nullable columns and a
-- defaulted flag are instant on MySQL 8 and MariaDB 10.6 and leave the hot indexes as they
-- are. As in 0008, each ADD COLUMN statement adds one column, and a second run of it fails
-- with "duplicate column name" (1060), which the migrator takes as done.
--   grp            the task's group, NULL for most tasks; VARBINARY like kind and key, so
--                  compared byte for byte
--   grp_seq        its place in the group: the order in which the group's inserts committed
--   grp_skip       1 when its kind skips failed tasks (written by every claim)
--   parked_run_at  non-NULL while parked behind an open task of its group: its own run_at,
--                  while run_at holds 9999-01-01 so that no claim, due count or overdue
--                  check meets it
ALTER TABLE {tasks} ADD COLUMN grp VARBINARY(512) NULL;
ALTER TABLE {tasks} ADD COLUMN grp_seq BIGINT NULL;
ALTER TABLE {tasks} ADD COLUMN grp_skip TINYINT NOT NULL DEFAULT 0;
ALTER TABLE {tasks} ADD COLUMN parked_run_at BIGINT NULL;

-- A group's open tasks (pending, running, failed unless skipped) in group order: where its
-- head is found, in one index dive. MySQL has no partial index, so the condition is a
-- virtual column, NULL for tasks that are not open and for every task of no group (they all
-- share one entry per kind, and a status change of theirs never touches this index).
-- Column and index in one statement: a second run fails on the column (1060), and then the
-- index is there too.
ALTER TABLE {tasks}
    ADD COLUMN grp_open_seq BIGINT AS (
        IF(status IN (0, 1) OR (status = 3 AND grp_skip = 0), grp_seq, NULL)) VIRTUAL,
    ADD INDEX grp_open (kind, grp, grp_open_seq);

-- The next place of each group; nothing else is kept per group.
CREATE TABLE IF NOT EXISTS {task_groups} (
    kind     VARBINARY(128) NOT NULL,
    grp      VARBINARY(512) NOT NULL,
    next_seq BIGINT         NOT NULL,
    PRIMARY KEY (kind, grp)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A grouped row takes the next place of its group and, when an open task of the group is
-- there before it, is parked. A trigger, so that the outbox INSERT with a `grp` column gets
-- exactly what an enqueue gets (the store inserts through it too). It runs with its
-- definer's rights: the application needs no right on {task_groups}.
--
-- The upsert locks the group's row until the inserting transaction ends, so producers of one
-- group queue there and places follow commit order (a rollback gives the place back). The
-- look for an open task reads the grp_open index alone: inside an INSERT, InnoDB reads it
-- as a locking read, so it sees the latest committed rows whatever the application's
-- isolation level, and touches no task row itself (so it never waits on a task row that a
-- worker holds locked). Whoever ends a grouped task locks the group's row before changing
-- the task (see src/groups.rs), so the two never wait for each other crosswise.
-- A repeat of an existing (kind, key) (ON DUPLICATE KEY UPDATE, INSERT IGNORE) consumes a
-- place and changes nothing: a gap in the numbers, never a change of order.
-- CREATE TRIGGER has no IF NOT EXISTS before MySQL 8.0.29: dropped first, so that a run
-- interrupted between the two statements is finished by the next one.
DROP TRIGGER IF EXISTS {tasks}_grp;
CREATE TRIGGER {tasks}_grp BEFORE INSERT ON {tasks} FOR EACH ROW
BEGIN
    IF NEW.grp IS NOT NULL THEN
        INSERT INTO {task_groups} (kind, grp, next_seq) VALUES (NEW.kind, NEW.grp, 1)
            ON DUPLICATE KEY UPDATE next_seq = next_seq + 1;
        SET NEW.grp_seq = (SELECT next_seq FROM {task_groups}
                           WHERE kind = NEW.kind AND grp = NEW.grp);
        IF NEW.status = 0 AND EXISTS (
            SELECT 1 FROM {tasks} FORCE INDEX (grp_open)
            WHERE kind = NEW.kind AND grp = NEW.grp AND grp_open_seq IS NOT NULL) THEN
            SET NEW.parked_run_at = NEW.run_at, NEW.run_at = 253370764800000;
        END IF;
    END IF;
END;
