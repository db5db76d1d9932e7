-- Concurrency limits per key (backstop_core::limit): the key a started task of a limited kind
-- counts under, written by the claim that admitted it; NULL for every other task.
ALTER TABLE backstop_tasks ADD COLUMN lkey TEXT;

-- The running tasks of limited kinds by key: each limited claim counts them from this index
-- alone (through backstop_tasks_leased it read every running row of every kind, a table
-- lookup each). Only rows with a key are in it, so other kinds never touch it.
CREATE INDEX backstop_tasks_running_keys ON backstop_tasks (kind, lkey, lease_until)
    WHERE status = 1 AND lkey IS NOT NULL;
