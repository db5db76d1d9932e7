-- Schedules' progress: how far each schedule is planned (every instant up to planned_until has
-- its task row), an outage being caught up, the last tick that was to run, a queue_one instant
-- waiting, a pause by hand, counters, and a definition registered over the API (JSON). Times
-- in BIGINT milliseconds since the Unix epoch. {schedules} is the prefixed table name. name is
-- VARBINARY like kind and key: compared byte for byte, with no PAD SPACE.
CREATE TABLE IF NOT EXISTS {schedules} (
    name          VARBINARY(191) NOT NULL,
    planned_until BIGINT         NULL,
    outage_from   BIGINT         NULL,
    outage_to     BIGINT         NULL,
    last_tick     BINARY(16)     NULL,
    waiting       BIGINT         NULL,
    paused        TINYINT        NOT NULL DEFAULT 0,
    paused_note   TEXT           NULL,
    missed        BIGINT         NOT NULL DEFAULT 0,
    overlapped    BIGINT         NOT NULL DEFAULT 0,
    definition    MEDIUMTEXT     NULL,
    updated_at    BIGINT         NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
