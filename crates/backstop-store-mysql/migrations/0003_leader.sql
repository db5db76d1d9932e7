-- Leadership leases: which one of several processes on this database runs the singleton
-- duties (lease rescue, expiry, retention). One row per leadership, held by owner until
-- lease_until (BIGINT milliseconds since the Unix epoch). A lapsed lease is taken over, a
-- resigned one is deleted. {leaders} is the prefixed table name.
CREATE TABLE IF NOT EXISTS {leaders} (
    name        VARCHAR(191)    NOT NULL,
    owner       VARCHAR(255)    NOT NULL,
    lease_until BIGINT          NOT NULL,
    -- When the holder took it (renewals keep it).
    since       BIGINT          NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
