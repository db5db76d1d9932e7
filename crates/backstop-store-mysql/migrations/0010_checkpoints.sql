-- Checkpoints (issue 17): the last cursor a running attempt saved, as JSON text, which the
-- next attempt receives. NULL until a first checkpoint. LONGTEXT keeps the exact text given,
-- as origin does. A nullable column added last is an instant change on MySQL 8 and MariaDB
-- 10.6 (no table rebuild) and changes no index. As in 0008, a second run of the statement
-- fails with "duplicate column name" (1060), which the migrator takes as done.
ALTER TABLE {tasks} ADD COLUMN checkpoint LONGTEXT NULL;
