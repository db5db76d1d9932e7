-- Schedules' progress: how far each schedule is planned (every instant up to planned_until has
-- its task row), an outage being caught up, the last tick that was to run, a queue_one instant
-- waiting, a pause by hand, counters, and a definition registered over the API (JSON).
CREATE TABLE {schema}.schedules (
    name          text COLLATE "C" PRIMARY KEY,
    planned_until timestamptz,
    outage_from   timestamptz,
    outage_to     timestamptz,
    last_tick     uuid,
    waiting       timestamptz,
    paused        boolean     NOT NULL DEFAULT false,
    paused_note   text,
    missed        bigint      NOT NULL DEFAULT 0,
    overlapped    bigint      NOT NULL DEFAULT 0,
    definition    text,
    updated_at    timestamptz NOT NULL
);
