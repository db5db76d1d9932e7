-- The ledger: one row per task, keyed forever by (kind, key). Every table lives in the
-- store's own schema, written {schema} here and replaced by the (validated, quoted) name.
-- The latest attempt's facts live on the task row (att_*) until a later attempt or a manual
-- action moves them to events, so a task that succeeds first time costs three row writes:
-- insert, claim, completion.
CREATE TABLE {schema}.tasks (
    -- Insertion order: listings page on it, newest first.
    seq             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              uuid        NOT NULL UNIQUE,
    kind            text        NOT NULL,
    key             text        NOT NULL,
    -- The exact bytes given at enqueue time.
    payload         bytea       NOT NULL,
    status          text        NOT NULL DEFAULT 'pending' CHECK (
                        status IN ('pending', 'running', 'succeeded', 'failed', 'compensated')),
    attempts        bigint      NOT NULL DEFAULT 0,
    max_attempts    bigint      NOT NULL DEFAULT 8,
    run_at          timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz,
    lease_owner     text,
    lease_until     timestamptz,
    -- Bumped by every claim; a completion is written only while it still matches.
    epoch           bigint      NOT NULL DEFAULT 0,
    traceparent     text,
    last_error      text,
    reason          text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    att_started_at  timestamptz,
    att_ended_at    timestamptz,
    att_outcome     text,
    att_error       text,
    att_http_status integer,
    att_worker      text,
    UNIQUE (kind, key)
);

-- Claims walk only due pending rows of one kind, oldest run_at first.
CREATE INDEX tasks_due ON {schema}.tasks (kind, run_at) WHERE status = 'pending';
-- Lease rescue walks only running rows.
CREATE INDEX tasks_leased ON {schema}.tasks (lease_until) WHERE status = 'running';
-- Expiry walks only pending rows that have a deadline.
CREATE INDEX tasks_expiring ON {schema}.tasks (expires_at)
    WHERE status = 'pending' AND expires_at IS NOT NULL;
-- Dead letters, listed without scanning finished work.
CREATE INDEX tasks_dead ON {schema}.tasks (seq) WHERE status = 'failed';

-- The timeline beyond what the task row holds: earlier attempts, manual actions, rescues,
-- expiries and rejected stale completions.
CREATE TABLE {schema}.events (
    seq         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id     uuid        NOT NULL,
    type        text        NOT NULL,
    at          timestamptz NOT NULL,
    attempt     bigint,
    outcome     text,
    error       text,
    http_status integer,
    duration_ms bigint,
    worker      text,
    actor       text,
    reason      text
);
-- One task's events in insertion order.
CREATE INDEX events_task ON {schema}.events (task_id, seq);
