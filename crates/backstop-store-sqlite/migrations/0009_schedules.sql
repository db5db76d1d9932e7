-- Schedules' progress: how far each schedule is planned (every instant up to planned_until has
-- its task row), an outage being caught up, the last tick that was to run, a queue_one instant
-- waiting, a pause by hand, counters, and a definition registered over the API (JSON).
-- Times are milliseconds since the Unix epoch.
CREATE TABLE backstop_schedules (
    name          TEXT    PRIMARY KEY,
    planned_until INTEGER,
    outage_from   INTEGER,
    outage_to     INTEGER,
    last_tick     BLOB,
    waiting       INTEGER,
    paused        INTEGER NOT NULL DEFAULT 0,
    paused_note   TEXT,
    missed        INTEGER NOT NULL DEFAULT 0,
    overlapped    INTEGER NOT NULL DEFAULT 0,
    definition    TEXT,
    updated_at    INTEGER NOT NULL
) WITHOUT ROWID;
