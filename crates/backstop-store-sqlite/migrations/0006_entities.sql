-- Guarded state transitions: the entities that callbacks drive through a configured state
-- machine. One row per (machine, entity_id) with its current state and the highest version
-- applied so far; `decisions` counts its history rows, so that a read of the history takes
-- exactly the decisions the row counts, whatever is being decided meanwhile. Times are
-- milliseconds since the Unix epoch.
CREATE TABLE backstop_entities (
    machine    TEXT    NOT NULL,
    entity_id  TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    version    INTEGER,
    decisions  INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (machine, entity_id)
) WITHOUT ROWID;

-- The event ids applied to each entity: a request whose event id is here is a duplicate.
-- Rejected and stale requests leave no row, so their events may apply when sent again.
CREATE TABLE backstop_entity_events (
    machine   TEXT    NOT NULL,
    entity_id TEXT    NOT NULL,
    event_id  TEXT    NOT NULL,
    at        INTEGER NOT NULL,
    PRIMARY KEY (machine, entity_id, event_id)
) WITHOUT ROWID;

-- Every decision, whatever its answer, in the order decided (seq).
CREATE TABLE backstop_entity_decisions (
    seq        INTEGER PRIMARY KEY,
    machine    TEXT    NOT NULL,
    entity_id  TEXT    NOT NULL,
    event_id   TEXT    NOT NULL,
    from_state TEXT    NOT NULL,
    to_state   TEXT    NOT NULL,
    answer     TEXT    NOT NULL CHECK (answer IN ('applied', 'duplicate', 'rejected', 'stale')),
    version    INTEGER,
    at         INTEGER NOT NULL
);

-- One entity's history in order: the index carries the rowid (seq) after its columns.
CREATE INDEX backstop_entity_decisions_entity ON backstop_entity_decisions (machine, entity_id);
