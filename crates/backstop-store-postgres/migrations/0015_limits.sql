-- Concurrency limits per key (backstop_core::limit): the key a started task of a limited kind
-- counts under, written by the claim that admitted it, compared as bytes like kind and key. A
-- claim counts its kind's running tasks with a live lease per key through tasks_leased. NULL
-- for every other task. A nullable column without a default only changes the catalog.
ALTER TABLE {schema}.tasks ADD COLUMN lkey text COLLATE "C";
