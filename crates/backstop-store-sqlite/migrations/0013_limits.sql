-- Concurrency limits per key (backstop_core::limit): the key a started task of a limited kind
-- counts under, written by the claim that admitted it. A claim counts its kind's running
-- tasks with a live lease per key through backstop_tasks_leased. NULL for every other task.
ALTER TABLE backstop_tasks ADD COLUMN lkey TEXT;
