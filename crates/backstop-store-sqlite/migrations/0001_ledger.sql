-- The ledger: one row per task, keyed forever by (kind, key).
-- Times are integer milliseconds since the Unix epoch, UTC.
-- The latest attempt's facts live on the task row (att_*) until a later attempt or a manual
-- action moves them to backstop_events, so a task that succeeds first time costs three row
-- writes: insert, claim, completion.
CREATE TABLE backstop_tasks (
    seq             INTEGER PRIMARY KEY,
    -- The 16 bytes of the UUIDv7: half the size of its text form in the row and the index.
    -- No CHECK (length(id) = 16): a function in a constraint makes SQLite keep a statement
    -- journal (a copy of every page touched) for each multi-row write.
    id              BLOB    NOT NULL UNIQUE,
    kind            TEXT    NOT NULL,
    key             TEXT    NOT NULL,
    payload         BLOB    NOT NULL,
    -- 0 pending, 1 running, 2 succeeded, 3 failed, 4 compensated: a small integer costs no
    -- bytes in the record and compares without a collation on every write and index check.
    status          INTEGER NOT NULL DEFAULT 0 CHECK (status BETWEEN 0 AND 4),
    attempts        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL DEFAULT 8,
    run_at          INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    expires_at      INTEGER,
    lease_owner     TEXT,
    lease_until     INTEGER,
    epoch           INTEGER NOT NULL DEFAULT 0,
    traceparent     TEXT,
    last_error      TEXT,
    reason          TEXT,
    created_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    att_started_at  INTEGER,
    att_ended_at    INTEGER,
    att_outcome     TEXT,
    att_error       TEXT,
    att_http_status INTEGER,
    att_worker      TEXT,
    UNIQUE (kind, key)
);

-- Claims walk only due pending rows of one kind.
CREATE INDEX backstop_tasks_due ON backstop_tasks (kind, run_at) WHERE status = 0;
-- Lease rescue walks only running rows.
CREATE INDEX backstop_tasks_leased ON backstop_tasks (lease_until) WHERE status = 1;
-- Expiry walks only pending rows that have a deadline.
CREATE INDEX backstop_tasks_expiring ON backstop_tasks (expires_at)
    WHERE status = 0 AND expires_at IS NOT NULL;
-- Dead letters, listed without scanning finished work.
CREATE INDEX backstop_tasks_dead ON backstop_tasks (seq) WHERE status = 3;

-- The timeline beyond what the task row holds: earlier attempts, manual actions, rescues,
-- expiries and rejected stale completions.
CREATE TABLE backstop_events (
    seq         INTEGER PRIMARY KEY,
    task_id     BLOB    NOT NULL,
    type        TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    attempt     INTEGER,
    outcome     TEXT,
    error       TEXT,
    http_status INTEGER,
    duration_ms INTEGER,
    worker      TEXT,
    actor       TEXT,
    reason      TEXT
);
-- Entries end with the rowid (seq), so one task's events come out in insertion order.
CREATE INDEX backstop_events_task ON backstop_events (task_id);
