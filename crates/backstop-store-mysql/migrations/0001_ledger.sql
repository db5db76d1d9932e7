-- The ledger: one row per task, keyed forever by (kind, key). {tasks} and {events} are the
-- prefixed table names. Statements end with a semicolon at the end of a line (the migrator
-- runs them one by one: DDL commits by itself in MySQL, so each is written to be repeatable).
--
-- Times are BIGINT milliseconds since the Unix epoch, UTC.
-- kind and key are VARBINARY: compared byte for byte, with no collation and no PAD SPACE, so
-- "a" and "a " or "A" are different business ids, as in every other store.
-- The latest attempt's facts live on the task row (att_*) until a later attempt or a manual
-- action moves them to {events}, so a task that succeeds first time costs three row writes:
-- insert, claim, completion.
CREATE TABLE IF NOT EXISTS {tasks} (
    seq             BIGINT          NOT NULL AUTO_INCREMENT,
    -- The 16 bytes of the UUIDv7.
    id              BINARY(16)      NOT NULL,
    kind            VARBINARY(128)  NOT NULL,
    `key`           VARBINARY(512)  NOT NULL,
    -- The exact bytes given at enqueue time.
    payload         LONGBLOB        NOT NULL,
    -- 0 pending, 1 running, 2 succeeded, 3 failed, 4 compensated.
    status          TINYINT         NOT NULL DEFAULT 0 CHECK (status BETWEEN 0 AND 4),
    attempts        INT             NOT NULL DEFAULT 0,
    max_attempts    INT             NOT NULL DEFAULT 8,
    run_at          BIGINT          NOT NULL,
    expires_at      BIGINT          NULL,
    lease_owner     VARCHAR(255)    NULL,
    lease_until     BIGINT          NULL,
    epoch           BIGINT          NOT NULL DEFAULT 0,
    traceparent     VARCHAR(512)    NULL,
    last_error      MEDIUMTEXT      NULL,
    reason          MEDIUMTEXT      NULL,
    created_at      BIGINT          NOT NULL,
    updated_at      BIGINT          NOT NULL,
    att_started_at  BIGINT          NULL,
    att_ended_at    BIGINT          NULL,
    att_outcome     VARCHAR(32)     NULL,
    att_error       MEDIUMTEXT      NULL,
    att_http_status INT             NULL,
    att_worker      VARCHAR(255)    NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY task_id (id),
    UNIQUE KEY kind_key (kind, `key`),
    -- Claims walk only due pending rows of one kind, oldest run_at first.
    KEY due (status, kind, run_at),
    -- Lease rescue walks only running rows, oldest lease first.
    KEY leased (status, lease_until),
    -- Expiry walks only pending rows that have a deadline.
    KEY expiring (status, expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The timeline beyond what the task row holds: earlier attempts, manual actions, rescues,
-- expiries and rejected stale completions. One task's events come out in insertion order
-- (seq), which the index carries.
CREATE TABLE IF NOT EXISTS {events} (
    seq         BIGINT          NOT NULL AUTO_INCREMENT,
    task_id     BINARY(16)      NOT NULL,
    type        VARCHAR(32)     NOT NULL,
    at          BIGINT          NOT NULL,
    attempt     INT             NULL,
    outcome     VARCHAR(32)     NULL,
    error       MEDIUMTEXT      NULL,
    http_status INT             NULL,
    duration_ms BIGINT          NULL,
    worker      VARCHAR(255)    NULL,
    actor       VARCHAR(255)    NULL,
    reason      MEDIUMTEXT      NULL,
    PRIMARY KEY (seq),
    KEY task (task_id, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
