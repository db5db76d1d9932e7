-- What the ordering-group triggers cost PostgreSQL per row: 20,000 tasks inserted, started and
-- finished in one statement each, without a group and each in a group of its own, twice.
-- backstop --database 'postgres://postgres@127.0.0.1:5432/test?schema=trigcost' migrate
-- psql -U postgres -h 127.0.0.1 -d test -f bench/pg-group-triggers/cost.sql
-- DROP SCHEMA trigcost CASCADE; afterwards.
\timing on
SET search_path = trigcost;
TRUNCATE tasks, task_groups;
-- ungrouped
INSERT INTO tasks (kind, key, payload) SELECT 'k', 'u'||i, '\x7b7d' FROM generate_series(1,20000) i;
UPDATE tasks SET status = 'running' WHERE kind = 'k';
UPDATE tasks SET status = 'succeeded' WHERE kind = 'k';
TRUNCATE tasks, task_groups;
-- grouped, 20,000 groups of one
INSERT INTO tasks (kind, key, payload, grp) SELECT 'k', 'g'||i, '\x7b7d', 'g'||i FROM generate_series(1,20000) i;
UPDATE tasks SET status = 'running' WHERE kind = 'k';
UPDATE tasks SET status = 'succeeded' WHERE kind = 'k';
TRUNCATE tasks, task_groups;
-- ungrouped again
INSERT INTO tasks (kind, key, payload) SELECT 'k', 'u'||i, '\x7b7d' FROM generate_series(1,20000) i;
UPDATE tasks SET status = 'running' WHERE kind = 'k';
UPDATE tasks SET status = 'succeeded' WHERE kind = 'k';
TRUNCATE tasks, task_groups;
INSERT INTO tasks (kind, key, payload, grp) SELECT 'k', 'g'||i, '\x7b7d', 'g'||i FROM generate_series(1,20000) i;
UPDATE tasks SET status = 'running' WHERE kind = 'k';
UPDATE tasks SET status = 'succeeded' WHERE kind = 'k';
