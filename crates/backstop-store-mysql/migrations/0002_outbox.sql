-- The outbox contract: an application creates a task inside its own transaction with
--
--     INSERT INTO backstop_tasks (kind, `key`, payload) VALUES (?, ?, ?)
--         ON DUPLICATE KEY UPDATE id = id
--
-- so every other column needs a default. 0001 gave none to id, run_at, created_at and
-- updated_at, and max_attempts defaulted to 8 whatever the kind's limit. Expression defaults
-- need MySQL 8.0.13 or MariaDB 10.2. Now:
--   id            a UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, version 7, 12 random
--                 bits, the variant, 62 random bits. The random bits are hex digits of
--                 MD5(UUID()): UUID() never repeats on a server (and RANDOM_BYTES() is not
--                 in MariaDB before 10.10).
--   run_at, created_at, updated_at
--                 now, in milliseconds since the Unix epoch, UTC whatever the session's
--                 time_zone (UTC_TIMESTAMP() less the epoch, with no zone conversion).
--   max_attempts  0, "the kind's limit": the first claim writes the kind's max_attempts.
-- MODIFY COLUMN restates each column as 0001 made it, with the new default: running it again
-- changes nothing, so it is repeatable like the others.
ALTER TABLE {tasks}
    MODIFY COLUMN id BINARY(16) NOT NULL DEFAULT (UNHEX(CONCAT(
        LPAD(HEX(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) DIV 1000), 12, '0'),
        '7', SUBSTR(MD5(UUID()), 1, 3), HEX(8 + FLOOR(RAND() * 4)),
        SUBSTR(MD5(UUID()), 1, 15)))),
    MODIFY COLUMN max_attempts INT NOT NULL DEFAULT 0,
    MODIFY COLUMN run_at BIGINT NOT NULL
        DEFAULT (TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) DIV 1000),
    MODIFY COLUMN created_at BIGINT NOT NULL
        DEFAULT (TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) DIV 1000),
    MODIFY COLUMN updated_at BIGINT NOT NULL
        DEFAULT (TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) DIV 1000);
