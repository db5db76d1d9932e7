-- Inbound callbacks: every request a configured source received, with its verdict
-- ('accepted', 'duplicate' or 'rejected' with a reason), the headers kept (a JSON array of
-- [name, value] pairs), the exact body bytes (a bounded excerpt for rejected requests, whose
-- full length is body_len), and the task an accepted or duplicate one is about.
-- {callbacks} is the prefixed table name. Ids are the 16 bytes of a UUIDv7, so they sort by
-- receive time, and times are BIGINT milliseconds since the Unix epoch.
CREATE TABLE IF NOT EXISTS {callbacks} (
    id          BINARY(16)     NOT NULL,
    source      VARBINARY(128) NOT NULL,
    received_at BIGINT         NOT NULL,
    verdict     VARCHAR(16)    NOT NULL CHECK (verdict IN ('accepted', 'duplicate', 'rejected')),
    reason      MEDIUMTEXT     NULL,
    event_id    VARBINARY(512) NULL,
    task_id     BINARY(16)     NULL,
    headers     MEDIUMTEXT     NOT NULL,
    body        LONGBLOB       NOT NULL,
    body_len    BIGINT         NOT NULL,
    PRIMARY KEY (id),
    KEY callbacks_source (source, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
