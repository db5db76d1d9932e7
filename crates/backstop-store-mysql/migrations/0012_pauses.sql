-- Pauses of a kind's dispatch: one row per scope ("kind:<name>") and cause (manual, breaker,
-- retry_after), read by every process each second; and the history of every pause and
-- resume, with who and why. Times in BIGINT milliseconds since the Unix epoch; scope is
-- VARBINARY like kind, compared byte for byte.
CREATE TABLE IF NOT EXISTS {pauses} (
    scope        VARBINARY(191) NOT NULL,
    cause        VARCHAR(16)    NOT NULL,
    reason       TEXT           NOT NULL,
    paused_until BIGINT         NULL,
    trips        BIGINT         NOT NULL,
    actor        TEXT           NOT NULL,
    since        BIGINT         NOT NULL,
    PRIMARY KEY (scope, cause)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {pause_log} (
    id           BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    scope        VARBINARY(191) NOT NULL,
    at           BIGINT         NOT NULL,
    action       VARCHAR(16)    NOT NULL,
    cause        VARCHAR(16)    NOT NULL,
    reason       TEXT           NOT NULL,
    actor        TEXT           NOT NULL,
    paused_until BIGINT         NULL,
    INDEX pause_log_scope (scope, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
