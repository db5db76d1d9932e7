-- Rate limits per key (backstop_core::limit::rate) and per-key overrides of a kind's limits.
-- Times are microseconds (rate state) or milliseconds (everything else) since the Unix epoch.

-- One row per (kind, key) whose rate state is still in the future: its theoretical arrival
-- time (tat) and the latest time a claim moved one of its tasks to (planned). Rows whose
-- times have both passed mean nothing and are deleted by the kind's next claim.
CREATE TABLE backstop_rate_keys (
    kind    TEXT    NOT NULL,
    rkey    TEXT    NOT NULL,
    tat     INTEGER NOT NULL,
    planned INTEGER NOT NULL,
    PRIMARY KEY (kind, rkey)
) WITHOUT ROWID;

-- A key's limits set at run time (PUT /v1/limits/{kind}/keys/{key}), in place of the kind's:
-- max for its concurrency limit, rate_* for its rate limit (NULL: the kind's).
CREATE TABLE backstop_limit_overrides (
    kind        TEXT    NOT NULL,
    lkey        TEXT    NOT NULL,
    max         INTEGER,
    rate_limit  INTEGER,
    rate_period INTEGER,
    rate_burst  INTEGER,
    actor       TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    since       INTEGER NOT NULL,
    PRIMARY KEY (kind, lkey)
) WITHOUT ROWID;

-- Every change of an override, with who and why: set (with the new values) or cleared.
CREATE TABLE backstop_limit_override_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT    NOT NULL,
    lkey        TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    action      TEXT    NOT NULL,
    max         INTEGER,
    rate_limit  INTEGER,
    rate_period INTEGER,
    rate_burst  INTEGER,
    actor       TEXT    NOT NULL,
    reason      TEXT    NOT NULL
);
CREATE INDEX backstop_limit_override_log_key ON backstop_limit_override_log (kind, lkey, id);
