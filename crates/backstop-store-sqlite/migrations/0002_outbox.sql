-- The outbox contract: an application creates a task inside its own transaction with
--
--     INSERT INTO backstop_tasks (kind, key, payload) VALUES (?, ?, ?)
--         ON CONFLICT (kind, key) DO NOTHING
--
-- so every other column needs a default. 0001 gave them all one but the id; and max_attempts
-- defaulted to 8 whatever the kind's limit. Now:
--   id            a UUIDv7: 48 bits of Unix milliseconds, version 7, 74 random bits
--                 (unhex() needs SQLite 3.41, unixepoch('subsec') 3.42);
--   max_attempts  0, "the kind's limit": the first claim writes the kind's max_attempts.
--
-- SQLite cannot change a column's default in place (ALTER TABLE has no such form), so the
-- table is rebuilt as https://sqlite.org/lang_altertable.html#otheralter describes: create
-- the new table, copy the rows, drop the old one, rename the new one, create the indexes
-- again. The migrator runs this inside its BEGIN IMMEDIATE transaction; backstop_tasks has no
-- foreign keys, triggers or views to carry over. Every row keeps its seq (rowid) and values.
CREATE TABLE backstop_tasks_new (
    seq             INTEGER PRIMARY KEY,
    id              BLOB    NOT NULL UNIQUE DEFAULT (unhex(
                        printf('%012x', CAST(unixepoch('subsec') * 1000 AS INTEGER))
                        || '7' || substr(hex(randomblob(2)), 2)
                        || substr('89ab', 1 + (random() & 3), 1)
                        || substr(hex(randomblob(8)), 2))),
    kind            TEXT    NOT NULL,
    key             TEXT    NOT NULL,
    payload         BLOB    NOT NULL,
    status          INTEGER NOT NULL DEFAULT 0 CHECK (status BETWEEN 0 AND 4),
    attempts        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL DEFAULT 0,
    run_at          INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    expires_at      INTEGER,
    lease_owner     TEXT,
    lease_until     INTEGER,
    epoch           INTEGER NOT NULL DEFAULT 0,
    traceparent     TEXT,
    last_error      TEXT,
    reason          TEXT,
    created_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    updated_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    att_started_at  INTEGER,
    att_ended_at    INTEGER,
    att_outcome     TEXT,
    att_error       TEXT,
    att_http_status INTEGER,
    att_worker      TEXT,
    UNIQUE (kind, key)
);

INSERT INTO backstop_tasks_new (
    seq, id, kind, key, payload, status, attempts, max_attempts, run_at, expires_at,
    lease_owner, lease_until, epoch, traceparent, last_error, reason, created_at, updated_at,
    att_started_at, att_ended_at, att_outcome, att_error, att_http_status, att_worker)
SELECT
    seq, id, kind, key, payload, status, attempts, max_attempts, run_at, expires_at,
    lease_owner, lease_until, epoch, traceparent, last_error, reason, created_at, updated_at,
    att_started_at, att_ended_at, att_outcome, att_error, att_http_status, att_worker
FROM backstop_tasks;

DROP TABLE backstop_tasks;

-- Renaming also renames the UNIQUE constraints' indexes (sqlite_autoindex_backstop_tasks_1
-- on id, _2 on kind and key), so they keep the names they had.
ALTER TABLE backstop_tasks_new RENAME TO backstop_tasks;

-- 0001's indexes, as they were (dropped with the old table).
CREATE INDEX backstop_tasks_due ON backstop_tasks (kind, run_at) WHERE status = 0;
CREATE INDEX backstop_tasks_leased ON backstop_tasks (lease_until) WHERE status = 1;
CREATE INDEX backstop_tasks_expiring ON backstop_tasks (expires_at)
    WHERE status = 0 AND expires_at IS NOT NULL;
CREATE INDEX backstop_tasks_dead ON backstop_tasks (seq) WHERE status = 3;
