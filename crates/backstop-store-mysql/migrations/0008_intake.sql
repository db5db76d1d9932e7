-- Broker intake (issue 14): where a task came from, and how it came again.
--   {tasks}.origin   the JSON object text a source gave with the task (a broker's queue,
--                    message id, delivery metadata), shown on its `created` event, NULL for
--                    tasks without one, outbox rows included.
--   {events}.origin  the same for a `redelivered` event: a repeat of the same (kind, key) and
--                    payload that came with an origin.
-- LONGTEXT keeps the exact text given (the JSON type would re-serialise it on MySQL and is
-- LONGTEXT anyway on MariaDB). MySQL 8 cannot add a column only if it is missing: each
-- statement adds one column, and the migrator takes "duplicate column name" (1060) on a
-- second run of it as already done.
ALTER TABLE {tasks} ADD COLUMN origin LONGTEXT NULL;
ALTER TABLE {events} ADD COLUMN origin LONGTEXT NULL;
