-- Kinds and keys compare as bytes (issue 16): every comparison in the unique (kind, key)
-- index and the claim's (kind, run_at) index called the database's collation (strcoll)
-- before, about 3 % of PostgreSQL's time on the hot path under C.UTF-8 and more under other
-- locales (measured with perf during `backstop bench`). Equality is byte equality under any
-- deterministic collation, so no lookup and no outbox insert changes; ON CONFLICT (kind, key)
-- still finds the same index. The table is not rewritten; the indexes on the two columns are
-- rebuilt, under the migration's lock: on a large ledger, expect this migration to take about
-- as long as a REINDEX of those indexes.
ALTER TABLE {schema}.tasks
    ALTER COLUMN kind TYPE text COLLATE "C",
    ALTER COLUMN key TYPE text COLLATE "C";
