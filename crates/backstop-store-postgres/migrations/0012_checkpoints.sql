-- Checkpoints (issue 17): the last cursor a running attempt saved, as JSON text; the next
-- attempt receives it. NULL until a first checkpoint. Adding a nullable column with no default
-- only changes the catalog: no row is rewritten, no index changes, and the migration's lock on
-- the table is held for a moment only.
ALTER TABLE {schema}.tasks ADD COLUMN checkpoint text;
