-- Wake-ups: an INSERT statement into tasks (the store's enqueue, the CLI, an application's
-- outbox insert) sends one notification at commit naming the kinds it created, so that idle
-- dispatchers of every process look for work at once instead of at their next poll. It is a
-- statement-level trigger: a batch of 1,000 tasks costs one notification, a statement that
-- created nothing (every key taken) sends none, and a rolled-back one sends nothing either.
-- Channel: the schema's name (its first 57 bytes) followed by '.tasks', e.g. 'backstop.tasks';
-- payload: the distinct kinds created, space-separated, or '' (any kind) when too long.
--
-- A notifying transaction holds a database-wide lock from just before its commit until after
-- it, so notifying commits do not group-commit: with 8 clients each inserting single rows,
-- notifying every one cut the inserts to a third. So at most one transaction at a time per
-- schema notifies (a try-lock: the others skip it and commit as they would without the
-- trigger); the dispatchers it wakes find their rows too, or the next poll does. It is a hint:
-- engines poll all the same.
CREATE FUNCTION {schema}.notify_work() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kinds text;
BEGIN
    SELECT string_agg(DISTINCT kind, ' ') INTO kinds FROM created;
    IF kinds IS NOT NULL
       AND pg_try_advisory_xact_lock(hashtextextended('backstop notify ' || TG_TABLE_SCHEMA, 0))
    THEN
        PERFORM pg_notify(left(TG_TABLE_SCHEMA, 57) || '.tasks',
                          CASE WHEN octet_length(kinds) <= 7000 THEN kinds ELSE '' END);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_notify_work AFTER INSERT ON {schema}.tasks
    REFERENCING NEW TABLE AS created
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.notify_work();
