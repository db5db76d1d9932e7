-- Concurrency limits per key (backstop_core::limit). As in 0011, a second run of the ADD
-- COLUMN fails with "duplicate column name" (1060), which the migrator takes as done.
--   lkey  the key a started task of a limited kind counts under, written by the claim that
--         admitted it; NULL for every other task. A claim counts its kind's running tasks with
--         a live lease per key through the `leased` index (status, lease_until).
ALTER TABLE {tasks} ADD COLUMN lkey VARBINARY(512) NULL;

-- One row per limited kind, locked by each of its claims until they commit, so that two
-- claimers never both take a key's last slot.
CREATE TABLE IF NOT EXISTS {claim_locks} (
    kind VARBINARY(128) NOT NULL PRIMARY KEY
) ENGINE = InnoDB;
