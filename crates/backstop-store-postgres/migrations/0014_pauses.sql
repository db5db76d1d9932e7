-- Pauses of a kind's dispatch: one row per scope ("kind:<name>") and cause (manual, breaker,
-- retry_after), read by every process each second; and the history of every pause and
-- resume, with who and why.
CREATE TABLE {schema}.pauses (
    scope        text COLLATE "C" NOT NULL,
    cause        text        NOT NULL,
    reason       text        NOT NULL,
    paused_until timestamptz,
    trips        bigint      NOT NULL,
    actor        text        NOT NULL,
    since        timestamptz NOT NULL,
    PRIMARY KEY (scope, cause)
);

CREATE TABLE {schema}.pause_log (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope        text COLLATE "C" NOT NULL,
    at           timestamptz NOT NULL,
    action       text        NOT NULL,
    cause        text        NOT NULL,
    reason       text        NOT NULL,
    actor        text        NOT NULL,
    paused_until timestamptz
);
CREATE INDEX pause_log_scope ON {schema}.pause_log (scope, id);
