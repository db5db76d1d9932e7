-- Guarded state transitions: the entities that callbacks drive through a configured state
-- machine. One row per (machine, entity_id) with its current state and the highest version
-- applied so far; `decisions` counts its history rows, so that a read of the history takes
-- exactly the decisions the row counts, whatever is being decided meanwhile. A request locks
-- the row (SELECT … FOR UPDATE) for its whole decision.
CREATE TABLE {schema}.entities (
    machine    text        NOT NULL,
    entity_id  text        NOT NULL,
    state      text        NOT NULL,
    version    bigint,
    decisions  bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (machine, entity_id)
);

-- The event ids applied to each entity: a request whose event id is here is a duplicate.
-- Rejected and stale requests leave no row, so their events may apply when sent again.
CREATE TABLE {schema}.entity_events (
    machine   text        NOT NULL,
    entity_id text        NOT NULL,
    event_id  text        NOT NULL,
    at        timestamptz NOT NULL,
    PRIMARY KEY (machine, entity_id, event_id)
);

-- Every decision, whatever its answer, in the order decided (seq).
CREATE TABLE {schema}.entity_decisions (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    machine    text        NOT NULL,
    entity_id  text        NOT NULL,
    event_id   text        NOT NULL,
    from_state text        NOT NULL,
    to_state   text        NOT NULL,
    answer     text        NOT NULL CHECK (answer IN ('applied', 'duplicate', 'rejected', 'stale')),
    version    bigint,
    at         timestamptz NOT NULL
);

CREATE INDEX entity_decisions_entity ON {schema}.entity_decisions (machine, entity_id, seq);
