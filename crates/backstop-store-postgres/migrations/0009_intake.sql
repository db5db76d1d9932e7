-- Broker intake (issue 14): where a task came from, and how it came again.
--   tasks.origin   the JSON object text a source gave with the task (a broker's queue, message
--                  id, delivery metadata), shown on its `created` event; NULL for tasks without
--                  one, outbox rows included.
--   events.origin  the same for a `redelivered` event: a repeat of the same (kind, key) and
--                  payload that came with an origin.
-- text rather than jsonb: the exact text given is kept (jsonb would reorder keys and drop
-- duplicates), and nothing queries inside it. A nullable column without a default is added
-- without rewriting the table.
ALTER TABLE {schema}.tasks ADD COLUMN IF NOT EXISTS origin text;
ALTER TABLE {schema}.events ADD COLUMN IF NOT EXISTS origin text;
