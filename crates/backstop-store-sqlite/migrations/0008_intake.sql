-- Broker intake (issue 14): where a task came from, and how it came again.
--   backstop_tasks.origin   the JSON object text a source gave with the task (a broker's
--                           queue, message id, delivery metadata), shown on its `created`
--                           event; NULL for tasks without one, outbox rows included.
--   backstop_events.origin  the same for a `redelivered` event: a repeat of the same
--                           (kind, key) and payload that came with an origin.
-- Kept as the exact text given (not re-serialised). Adding a nullable column with no default
-- rewrites no rows, and no index changes, so the pinned query plans stay as they are.
ALTER TABLE backstop_tasks ADD COLUMN origin TEXT;
ALTER TABLE backstop_events ADD COLUMN origin TEXT;
