-- Statement reconciliation runs: one row per run, keyed by an id derived from the kind, the
-- statement's bytes and the window, so that the same reconciliation run again is the same
-- row. Times are BIGINT milliseconds since the Unix epoch. {statement_runs} is the prefixed
-- table name.
CREATE TABLE IF NOT EXISTS {statement_runs} (
    id          VARCHAR(191) NOT NULL,
    kind        VARCHAR(191) NOT NULL,
    statement   TEXT         NOT NULL,
    started_at  BIGINT       NOT NULL,
    finished_at BIGINT       NULL,
    verdict     VARCHAR(32)  NULL,
    applied     BIGINT       NOT NULL DEFAULT 0,
    report      LONGTEXT     NULL,
    PRIMARY KEY (id),
    KEY started (started_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
