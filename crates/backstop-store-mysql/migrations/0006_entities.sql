-- Guarded state transitions: the entities that callbacks drive through a configured state
-- machine. {entities}, {entity_events} and {entity_decisions} are the prefixed table names.
-- Times are BIGINT milliseconds since the Unix epoch, UTC. machine, entity_id and event_id
-- are VARBINARY, compared byte for byte as kind and key are.
--
-- One row per (machine, entity_id) with its current state and the highest version applied so
-- far. decisions counts its history rows, so that a read of the history takes exactly the
-- decisions the row counts, whatever is being decided meanwhile. A request locks the row
-- (SELECT ... FOR UPDATE) for its whole decision.
CREATE TABLE IF NOT EXISTS {entities} (
    machine    VARBINARY(128) NOT NULL,
    entity_id  VARBINARY(512) NOT NULL,
    state      VARBINARY(64)  NOT NULL,
    version    BIGINT         NULL,
    decisions  BIGINT         NOT NULL DEFAULT 0,
    created_at BIGINT         NOT NULL,
    updated_at BIGINT         NOT NULL,
    PRIMARY KEY (machine, entity_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The event ids applied to each entity: a request whose event id is here is a duplicate.
-- Rejected and stale requests leave no row, so their events may apply when sent again.
CREATE TABLE IF NOT EXISTS {entity_events} (
    machine   VARBINARY(128) NOT NULL,
    entity_id VARBINARY(512) NOT NULL,
    event_id  VARBINARY(255) NOT NULL,
    at        BIGINT         NOT NULL,
    PRIMARY KEY (machine, entity_id, event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Every decision, whatever its answer, in the order decided (seq).
CREATE TABLE IF NOT EXISTS {entity_decisions} (
    seq        BIGINT         NOT NULL AUTO_INCREMENT,
    machine    VARBINARY(128) NOT NULL,
    entity_id  VARBINARY(512) NOT NULL,
    event_id   VARBINARY(255) NOT NULL,
    from_state VARBINARY(64)  NOT NULL,
    to_state   VARBINARY(64)  NOT NULL,
    answer     VARCHAR(16)    NOT NULL CHECK (answer IN ('applied', 'duplicate', 'rejected', 'stale')),
    version    BIGINT         NULL,
    at         BIGINT         NOT NULL,
    PRIMARY KEY (seq),
    KEY entity (machine, entity_id, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
