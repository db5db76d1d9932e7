-- Statement reconciliation runs: one row per run, keyed by an id derived from the kind, the
-- statement's bytes and the window, so that the same reconciliation run again is the same
-- row. Times are milliseconds since the Unix epoch; the report is the JSON report.
CREATE TABLE backstop_statement_runs (
    id          TEXT    PRIMARY KEY,
    kind        TEXT    NOT NULL,
    statement   TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    verdict     TEXT,
    applied     INTEGER NOT NULL DEFAULT 0,
    report      TEXT
) WITHOUT ROWID;
CREATE INDEX backstop_statement_runs_started ON backstop_statement_runs (started_at);
