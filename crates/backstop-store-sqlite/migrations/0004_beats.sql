-- Beats: how one process sees the others. `node:<owner>` rows say which kinds a live process
-- serves; the `reconciler` row is the leader's last pass, watched by every process. One row
-- per name, overwritten by each beat; `at` is milliseconds since the Unix epoch.
CREATE TABLE backstop_beats (
    name   TEXT    PRIMARY KEY,
    owner  TEXT    NOT NULL,
    at     INTEGER NOT NULL,
    detail TEXT    NOT NULL
) WITHOUT ROWID;
