-- The hot path (issue 16): claims, rescue, expiry and the dead-letter list read a narrow table
-- of the open tasks instead of partial indexes on `tasks`, so that the ledger row's own
-- updates (claim, completion) change no indexed column and are HOT updates.
--
-- Before: `status` sat in the predicates of four partial indexes of `tasks`, so a claim and a
-- completion each wrote a new row version with an entry in all three unique indexes (seq, id,
-- (kind, key)) and in a partial one. Now `tasks` has only those three indexes, none of them on
-- a column that changes after the insert, and `tasks_open` holds one row per task that is
-- pending, running or failed (a dead letter awaiting a person), mirroring the columns the
-- claim, rescue and expiry look for. A task that ends (succeeded, compensated) leaves it:
-- completions delete from it, so it stays as small as the work in flight and the dead
-- letters, however long the ledger grows.
--
-- Invariant, kept by every statement of the store in the transaction that changes `tasks`:
-- a task has a `tasks_open` row exactly while its status is pending, running or failed, with
-- the same kind, status, run_at, lease_until and expires_at. Lock order: a task's `tasks` row
-- before its `tasks_open` row, always (claim, rescue and expiry lock `tasks` rows through the
-- open table with SKIP LOCKED).
--
-- The outbox contract is unchanged: an application's plain INSERT INTO tasks reaches this
-- table through the statement-level trigger below, in the same transaction.
--
-- Upgrading: stop every process of the previous release first. They keep writing `tasks`
-- without this table (a rolling upgrade would leave it stale).
CREATE TABLE {schema}.tasks_open (
    seq         bigint      PRIMARY KEY,
    kind        text        COLLATE "C" NOT NULL,
    status      text        NOT NULL CHECK (status IN ('pending', 'running', 'failed')),
    run_at      timestamptz NOT NULL,
    lease_until timestamptz,
    expires_at  timestamptz
);

-- Claims walk only due pending rows of one kind, oldest run_at first.
CREATE INDEX tasks_open_due ON {schema}.tasks_open (kind, run_at) WHERE status = 'pending';
-- Lease rescue walks only running rows.
CREATE INDEX tasks_open_leased ON {schema}.tasks_open (lease_until) WHERE status = 'running';
-- Expiry walks only pending rows that have a deadline.
CREATE INDEX tasks_open_expiring ON {schema}.tasks_open (expires_at)
    WHERE status = 'pending' AND expires_at IS NOT NULL;
-- Dead letters, listed without scanning finished work.
CREATE INDEX tasks_open_dead ON {schema}.tasks_open (seq) WHERE status = 'failed';

-- Every task already open, with its lease: pending and running work carries forward.
INSERT INTO {schema}.tasks_open (seq, kind, status, run_at, lease_until, expires_at)
SELECT seq, kind, status, run_at, lease_until, expires_at FROM {schema}.tasks
WHERE status IN ('pending', 'running', 'failed');

DROP INDEX {schema}.tasks_due;
DROP INDEX {schema}.tasks_leased;
DROP INDEX {schema}.tasks_expiring;
DROP INDEX {schema}.tasks_dead;

-- Kinds and keys compare as bytes: every comparison in the unique (kind, key) index and the
-- claim's (kind, run_at) index called the database's collation (strcoll) before, about 3 % of
-- PostgreSQL's time on the hot path under C.UTF-8 and more under other locales. Equality is
-- byte equality under any deterministic collation, so no lookup changes; the indexes on the
-- two columns are rebuilt (the table is not rewritten).
ALTER TABLE {schema}.tasks
    ALTER COLUMN kind TYPE text COLLATE "C",
    ALTER COLUMN key TYPE text COLLATE "C";

-- Room on each page for the claim's and the completion's row versions, so that both stay
-- on the row's page (a HOT update needs it). Applies to pages written from now on.
ALTER TABLE {schema}.tasks SET (fillfactor = 50);

-- Every INSERT statement into tasks (the store's enqueue, a callback, an application's outbox
-- insert) opens its new rows in the same statement's transaction: one statement-level trigger,
-- so a batch of 1,000 costs one INSERT … SELECT here.
--
-- SECURITY DEFINER: the outbox's application role needs only INSERT (and SELECT of kind, key)
-- on tasks, as before; the function writes tasks_open as the role that migrated. Its search
-- path is pinned, and it names every object with its schema.
CREATE FUNCTION {schema}.open_created() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO {schema}.tasks_open (seq, kind, status, run_at, lease_until, expires_at)
    SELECT seq, kind, status, run_at, lease_until, expires_at FROM created
    WHERE status IN ('pending', 'running', 'failed');
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_open_created AFTER INSERT ON {schema}.tasks
    REFERENCING NEW TABLE AS created
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.open_created();
