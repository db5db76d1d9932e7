-- Concurrency limits per key (backstop_core::limit): the key a started task of a limited kind
-- counts under, written by the claim that admitted it, compared as bytes like kind and key;
-- NULL for every other task. A nullable column without a default only changes the catalog.
ALTER TABLE {schema}.tasks ADD COLUMN lkey text COLLATE "C";

-- The running tasks of limited kinds by key: each limited claim counts them from this index
-- (through tasks_leased it visited every running row of every kind). Only rows with a key are
-- in it, so other kinds never touch it.
CREATE INDEX tasks_running_keys ON {schema}.tasks (kind, lkey) INCLUDE (lease_until)
    WHERE status = 'running' AND lkey IS NOT NULL;
