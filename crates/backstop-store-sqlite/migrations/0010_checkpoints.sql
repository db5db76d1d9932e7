-- Checkpoints (issue 17): the last cursor a running attempt saved, as JSON text; the next
-- attempt receives it. NULL until a first checkpoint. A nullable column with no default
-- rewrites no rows and changes no index, so the pinned query plans stay as they are.
ALTER TABLE backstop_tasks ADD COLUMN checkpoint TEXT;
