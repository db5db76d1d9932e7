-- Inbound callbacks: every request a configured source received, with its verdict
-- ('accepted', 'duplicate' or 'rejected' with a reason), the headers kept (a JSON array of
-- [name, value] pairs), the exact body bytes (a bounded excerpt for rejected requests, whose
-- full length is body_len), and the task an accepted or duplicate one is about. Ids are
-- UUIDv7, so they sort by receive time.
CREATE TABLE {schema}.callbacks (
    id          uuid        PRIMARY KEY,
    source      text        NOT NULL,
    received_at timestamptz NOT NULL,
    verdict     text        NOT NULL CHECK (verdict IN ('accepted', 'duplicate', 'rejected')),
    reason      text,
    event_id    text,
    task_id     uuid,
    headers     text        NOT NULL,
    body        bytea       NOT NULL,
    body_len    bigint      NOT NULL
);

-- One source's requests, newest first.
CREATE INDEX callbacks_source ON {schema}.callbacks (source, id);
