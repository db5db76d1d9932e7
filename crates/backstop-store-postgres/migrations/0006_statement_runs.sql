-- Statement reconciliation runs: one row per run, keyed by an id derived from the kind, the
-- statement's bytes and the window, so that the same reconciliation run again is the same
-- row.
CREATE TABLE {schema}.statement_runs (
    id          text        PRIMARY KEY,
    kind        text        NOT NULL,
    statement   text        NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    verdict     text,
    applied     bigint      NOT NULL DEFAULT 0,
    report      text
);
CREATE INDEX statement_runs_started ON {schema}.statement_runs (started_at);
