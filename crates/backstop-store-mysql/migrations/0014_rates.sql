-- Rate limits per key (backstop_core::limit::rate) and per-key overrides of a kind's limits.

-- One row per (kind, key) whose rate state is still in the future: its theoretical arrival
-- time (tat) and the latest time a claim moved one of its tasks to (planned), in microseconds
-- since the Unix epoch. Rows whose times have both passed mean nothing and are deleted by the
-- kind's next claim.
CREATE TABLE IF NOT EXISTS {rate_keys} (
    kind    VARBINARY(128) NOT NULL,
    rkey    VARBINARY(512) NOT NULL,
    tat     BIGINT         NOT NULL,
    planned BIGINT         NOT NULL,
    PRIMARY KEY (kind, rkey)
) ENGINE = InnoDB;

-- A key's limits set at run time (PUT /v1/limits/{kind}/keys/{key}), in place of the kind's:
-- max for its concurrency limit, rate_* for its rate limit (rate_period in milliseconds; NULL:
-- the kind's). Times in milliseconds since the Unix epoch.
CREATE TABLE IF NOT EXISTS {limit_overrides} (
    kind        VARBINARY(128) NOT NULL,
    lkey        VARBINARY(512) NOT NULL,
    max         BIGINT         NULL,
    rate_limit  BIGINT         NULL,
    rate_period BIGINT         NULL,
    rate_burst  BIGINT         NULL,
    actor       TEXT           NOT NULL,
    reason      TEXT           NOT NULL,
    since       BIGINT         NOT NULL,
    PRIMARY KEY (kind, lkey)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Every change of an override, with who and why: set (with the new values) or cleared.
CREATE TABLE IF NOT EXISTS {limit_override_log} (
    id          BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind        VARBINARY(128) NOT NULL,
    lkey        VARBINARY(512) NOT NULL,
    at          BIGINT         NOT NULL,
    action      VARCHAR(16)    NOT NULL,
    max         BIGINT         NULL,
    rate_limit  BIGINT         NULL,
    rate_period BIGINT         NULL,
    rate_burst  BIGINT         NULL,
    actor       TEXT           NOT NULL,
    reason      TEXT           NOT NULL,
    INDEX limit_override_log_key (kind, lkey, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
