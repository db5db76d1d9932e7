-- Inbound callbacks: every request a configured source received, with its verdict
-- ('accepted', 'duplicate' or 'rejected' with a reason), the headers kept (a JSON array of
-- [name, value] pairs), the exact body bytes (a bounded excerpt for rejected requests, whose
-- full length is body_len), and the task an accepted or duplicate one is about. Times are
-- milliseconds since the Unix epoch; ids are UUIDv7 bytes, so they sort by receive time.
CREATE TABLE backstop_callbacks (
    id          BLOB    NOT NULL PRIMARY KEY,
    source      TEXT    NOT NULL,
    received_at INTEGER NOT NULL,
    verdict     TEXT    NOT NULL CHECK (verdict IN ('accepted', 'duplicate', 'rejected')),
    reason      TEXT,
    event_id    TEXT,
    task_id     BLOB,
    headers     TEXT    NOT NULL,
    body        BLOB    NOT NULL,
    body_len    INTEGER NOT NULL
);

-- One source's requests, newest first.
CREATE INDEX backstop_callbacks_source ON backstop_callbacks (source, id);
