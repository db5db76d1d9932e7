-- Pauses of a kind's dispatch: one row per scope ("kind:<name>") and cause (manual, breaker,
-- retry_after), read by every process each second; and the history of every pause and
-- resume, with who and why. Times are milliseconds since the Unix epoch.
CREATE TABLE backstop_pauses (
    scope        TEXT    NOT NULL,
    cause        TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    paused_until INTEGER,
    trips        INTEGER NOT NULL,
    actor        TEXT    NOT NULL,
    since        INTEGER NOT NULL,
    PRIMARY KEY (scope, cause)
) WITHOUT ROWID;

CREATE TABLE backstop_pause_log (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    scope        TEXT    NOT NULL,
    at           INTEGER NOT NULL,
    action       TEXT    NOT NULL,
    cause        TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    actor        TEXT    NOT NULL,
    paused_until INTEGER
);
CREATE INDEX backstop_pause_log_scope ON backstop_pause_log (scope, id);
