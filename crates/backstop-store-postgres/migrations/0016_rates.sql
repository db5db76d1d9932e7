-- Rate limits per key (backstop_core::limit::rate) and per-key overrides of a kind's limits.

-- One row per (kind, key) whose rate state is still in the future: its theoretical arrival
-- time (tat) and the latest time a claim moved one of its tasks to (planned), in microseconds
-- since the Unix epoch. Rows whose times have both passed mean nothing and are deleted by the
-- kind's next claim.
CREATE TABLE {schema}.rate_keys (
    kind    text COLLATE "C" NOT NULL,
    rkey    text COLLATE "C" NOT NULL,
    tat     bigint NOT NULL,
    planned bigint NOT NULL,
    PRIMARY KEY (kind, rkey)
);

-- A key's limits set at run time (PUT /v1/limits/{kind}/keys/{key}), in place of the kind's:
-- max for its concurrency limit, rate_* for its rate limit (rate_period in milliseconds; NULL:
-- the kind's).
CREATE TABLE {schema}.limit_overrides (
    kind        text COLLATE "C" NOT NULL,
    lkey        text COLLATE "C" NOT NULL,
    max         bigint,
    rate_limit  bigint,
    rate_period bigint,
    rate_burst  bigint,
    actor       text        NOT NULL,
    reason      text        NOT NULL,
    since       timestamptz NOT NULL,
    PRIMARY KEY (kind, lkey)
);

-- Every change of an override, with who and why: set (with the new values) or cleared.
CREATE TABLE {schema}.limit_override_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text COLLATE "C" NOT NULL,
    lkey        text COLLATE "C" NOT NULL,
    at          timestamptz NOT NULL,
    action      text        NOT NULL,
    max         bigint,
    rate_limit  bigint,
    rate_period bigint,
    rate_burst  bigint,
    actor       text        NOT NULL,
    reason      text        NOT NULL
);
CREATE INDEX limit_override_log_key ON {schema}.limit_override_log (kind, lkey, id);
