-- Beats: how one process sees the others. `node:<owner>` rows say which kinds a live process
-- serves, the `reconciler` row is the leader's last pass, watched by every process. One row
-- per name, overwritten by each beat, `at` in BIGINT milliseconds since the Unix epoch.
-- {beats} is the prefixed table name.
CREATE TABLE IF NOT EXISTS {beats} (
    name   VARCHAR(191) NOT NULL,
    owner  VARCHAR(255) NOT NULL,
    at     BIGINT       NOT NULL,
    detail MEDIUMTEXT   NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
