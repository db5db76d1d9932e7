-- Ordering per group (issue 18; backstop_core::group has the design). New columns on tasks:
--   grp            the task's group within its kind, NULL for most tasks; compared as bytes,
--                  as kind and key are (0010)
--   grp_seq        its place in the group: the order in which the group's inserts committed
--   grp_skip       true when its kind skips failed tasks (written by every claim of it)
--   parked_run_at  non-NULL while the task is parked behind an open task of its group: its own
--                  run_at, while run_at holds 9999-01-01 so that no claim, due count or overdue
--                  check meets it through the indexes they already use
-- Nullable columns and a constant default only change the catalog: no row is rewritten.
-- A grouped task is *open* while pending or running, or failed unless it skips: the
-- predicate below, written the same way wherever a group's first open task is looked for.
ALTER TABLE {schema}.tasks
    ADD COLUMN grp text COLLATE "C",
    ADD COLUMN grp_seq bigint,
    ADD COLUMN grp_skip boolean NOT NULL DEFAULT false,
    ADD COLUMN parked_run_at timestamptz;

-- A group's open tasks in group order: where its head is found. Tasks of no group are not in
-- it. (Built by one scan of the table, under the migration's lock.)
CREATE INDEX tasks_grp_open ON {schema}.tasks (kind, grp, grp_seq)
    WHERE grp IS NOT NULL
      AND (status IN ('pending', 'running') OR (status = 'failed' AND NOT grp_skip));

-- The next place of each group; nothing else is kept per group. Only the functions below
-- (which run as their owner) touch it, so no role needs privileges on it.
CREATE TABLE {schema}.task_groups (
    kind     text COLLATE "C" NOT NULL,
    grp      text COLLATE "C" NOT NULL,
    next_seq bigint           NOT NULL,
    PRIMARY KEY (kind, grp)
);

-- A grouped row takes the next place of its group and, behind an open task of the group, is
-- parked. A trigger, so that an application's outbox INSERT with a `grp` column gets exactly
-- what an enqueue gets: SECURITY DEFINER, so that its role needs no more than the documented
-- privileges. The upsert locks the group's row until the transaction ends, so producers of one
-- group queue there and places follow commit order (a rollback gives its place back); the
-- lookup after it is a statement of its own, whose snapshot (READ COMMITTED) sees the tasks of
-- whoever held the row before, and this statement's earlier rows.
CREATE FUNCTION {schema}.group_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off AS $$
BEGIN
    INSERT INTO {schema}.task_groups AS g (kind, grp, next_seq) VALUES (NEW.kind, NEW.grp, 1)
    ON CONFLICT (kind, grp) DO UPDATE SET next_seq = g.next_seq + 1
    RETURNING g.next_seq INTO NEW.grp_seq;
    NEW.parked_run_at := NULL;
    IF NEW.status = 'pending' AND EXISTS (
        SELECT 1 FROM {schema}.tasks AS o
        WHERE o.kind = NEW.kind AND o.grp = NEW.grp AND o.grp IS NOT NULL
          AND (o.status IN ('pending', 'running') OR (o.status = 'failed' AND NOT o.grp_skip)))
    THEN
        NEW.parked_run_at := NEW.run_at;
        -- backstop_core::group::PARKED_RUN_AT
        NEW.run_at := '9999-01-01 00:00:00+00';
    END IF;
    RETURN NEW;
END
$$;

-- Both functions run with enable_seqscan off. PL/pgSQL keeps a statement's plan for the
-- session: planned while the table was small (a new ledger), the look for an open task of the
-- group scanned the whole table, and kept doing so as it grew (autovacuum's ANALYZE is what
-- would replan it, and it may be off or late): every grouped insert read every task, an
-- enqueue batch of 1,000 took seconds. Their lookups are meant for tasks_grp_open alone.
--
-- Tasks of no group pay only the WHEN condition: the function is not called for them.
CREATE TRIGGER tasks_group_insert BEFORE INSERT ON {schema}.tasks
    FOR EACH ROW WHEN (NEW.grp IS NOT NULL)
    EXECUTE FUNCTION {schema}.group_insert();

-- When a grouped task stops being open (succeeded, compensated, or failed when it skips), its
-- group's first open task is unparked if it is parked, in the same transaction. Every path
-- that ends a task (completion, rescue, release, expiry, a manual resolve or cancel) goes
-- through here. The group's row is locked first: an enqueuer of the group holds it until it
-- commits, so the head is looked for (by a statement of its own, a fresh snapshot) with that
-- enqueuer's task in sight; and an enqueuer that comes after waits for this transaction and
-- then sees the task ended. A task that ended while parked itself (canceled, expired) gets its
-- own run_at back too: it is no longer parked, and a manual retry of it later must not find
-- it so. The unpark sets no status, so it sets off no trigger itself.
CREATE FUNCTION {schema}.group_promote() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off AS $$
BEGIN
    PERFORM FROM {schema}.task_groups WHERE kind = NEW.kind AND grp = NEW.grp FOR UPDATE;
    UPDATE {schema}.tasks SET run_at = parked_run_at, parked_run_at = NULL
    WHERE parked_run_at IS NOT NULL AND seq IN (NEW.seq, (
        SELECT o.seq FROM {schema}.tasks AS o
        WHERE o.kind = NEW.kind AND o.grp = NEW.grp AND o.grp IS NOT NULL
          AND (o.status IN ('pending', 'running') OR (o.status = 'failed' AND NOT o.grp_skip))
        ORDER BY o.grp_seq
        LIMIT 1));
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_group_promote AFTER UPDATE OF status ON {schema}.tasks
    FOR EACH ROW WHEN (NEW.grp IS NOT NULL AND OLD.status <> NEW.status
                       AND (NEW.status IN ('succeeded', 'compensated')
                            OR (NEW.status = 'failed' AND NEW.grp_skip)))
    EXECUTE FUNCTION {schema}.group_promote();
