-- Leadership leases: which one of several processes on this database runs the singleton
-- duties (lease rescue, expiry, retention). One row per leadership, held by `owner` until
-- `lease_until` (milliseconds since the Unix epoch); a lapsed lease is taken over, a
-- resigned one is deleted.
CREATE TABLE backstop_leaders (
    name        TEXT    PRIMARY KEY,
    owner       TEXT    NOT NULL,
    lease_until INTEGER NOT NULL,
    -- When the holder took it (renewals keep it).
    since       INTEGER NOT NULL
) WITHOUT ROWID;
