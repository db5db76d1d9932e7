-- The ledger: one row per task, keyed forever by (kind, key).
-- Times are integer milliseconds since the Unix epoch, UTC.
-- The latest attempt's facts live on the task row (att_*) until a later attempt or a manual
-- action moves them to backstop_events, so a task that succeeds first time costs three row
-- writes: insert, claim, completion.
CREATE TABLE backstop_tasks (
    seq             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    kind            TEXT    NOT NULL,
    key             TEXT    NOT NULL,
    payload         BLOB    NOT NULL,
    status          TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'compensated')),
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
CREATE INDEX backstop_tasks_due ON backstop_tasks (kind, run_at) WHERE status = 'pending';
-- Lease rescue walks only running rows.
CREATE INDEX backstop_tasks_leased ON backstop_tasks (lease_until) WHERE status = 'running';
-- Expiry walks only pending rows that have a deadline.
CREATE INDEX backstop_tasks_expiring ON backstop_tasks (expires_at)
    WHERE status = 'pending' AND expires_at IS NOT NULL;
-- Dead letters, listed without scanning finished work.
CREATE INDEX backstop_tasks_dead ON backstop_tasks (seq) WHERE status = 'failed';

-- The timeline beyond what the task row holds: earlier attempts, manual actions, rescues,
-- expiries and rejected stale completions.
CREATE TABLE backstop_events (
    seq         INTEGER PRIMARY KEY,
    task_id     TEXT    NOT NULL,
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
CREATE INDEX backstop_events_task ON backstop_events (task_id, seq);
