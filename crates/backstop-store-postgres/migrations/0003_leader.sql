-- Leadership leases: which one of several processes on this database runs the singleton
-- duties (lease rescue, expiry, retention). One row per leadership, held by owner until
-- lease_until; a lapsed lease is taken over, a resigned one is deleted.
CREATE TABLE {schema}.leaders (
    name        text        PRIMARY KEY,
    owner       text        NOT NULL,
    lease_until timestamptz NOT NULL,
    -- When the holder took it (renewals keep it).
    since       timestamptz NOT NULL
);
