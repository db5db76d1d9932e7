-- Beats: how one process sees the others. `node:<owner>` rows say which kinds a live process
-- serves; the `reconciler` row is the leader's last pass, watched by every process. One row
-- per name, overwritten by each beat.
CREATE TABLE {schema}.beats (
    name   text        PRIMARY KEY,
    owner  text        NOT NULL,
    at     timestamptz NOT NULL,
    detail text        NOT NULL
);
