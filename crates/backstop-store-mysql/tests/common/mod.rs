//! What the MySQL tests share: the server from `BACKSTOP_TEST_MYSQL_URL`, and tables of
//! their own per test (a fresh random prefix), dropped when the guard goes.

#![allow(dead_code)] // Each test file uses its own part.

use backstop_store_mysql::{MysqlOptions, MysqlStore, ScratchPrefix};

/// The variable that names the test server, e.g. `mysql://root@127.0.0.1:3306/test`.
pub const URL_VAR: &str = "BACKSTOP_TEST_MYSQL_URL";

/// The test server's URL, if one is configured.
pub fn url() -> Option<String> {
    backstop_store_tests::server::server_url(URL_VAR)
}

/// True (after saying so on stderr) when no server is configured: the test passes untested.
pub fn skip() -> bool {
    backstop_store_tests::server::skip_without(URL_VAR)
}

/// Tables of their own for one test: a random prefix, whose tables are dropped when this goes.
pub struct PrefixGuard {
    pub url: String,
    pub prefix: String,
    scratch: ScratchPrefix,
}

impl PrefixGuard {
    /// A new, unique prefix on the test server (no tables yet: migrating creates them).
    pub fn new() -> Self {
        let url = url().expect("the test server URL");
        let scratch = ScratchPrefix::new(&url, "t").expect("a scratch prefix");
        let prefix = scratch.prefix().to_string();
        PrefixGuard {
            url,
            prefix,
            scratch,
        }
    }

    /// Options for a store on this prefix.
    pub fn options(&self) -> MysqlOptions {
        let mut opts = self.scratch.options();
        opts.max_connections = 8;
        opts
    }

    /// A migrated store on this prefix.
    pub async fn store(&self) -> MysqlStore {
        MysqlStore::open_with(self.options())
            .await
            .expect("open the MySQL store")
    }
}

impl Drop for PrefixGuard {
    fn drop(&mut self) {
        // Best effort: leftover tables are only clutter.
        let _ = self.scratch.drop_all_blocking();
    }
}

/// Deadlocks InnoDB has detected since the server started (MariaDB's status variable, or
/// MySQL's `lock_deadlocks` metric).
pub async fn deadlocks() -> i64 {
    let url = url().expect("the test server URL");
    let mut conn = <sqlx::MySqlConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("connect");
    let status: Option<(String, String)> =
        sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")
            .fetch_optional(&mut conn)
            .await
            .expect("status");
    match status {
        Some((_, n)) => n.parse().expect("a count"),
        None => sqlx::query_scalar(
            "SELECT `COUNT` FROM information_schema.INNODB_METRICS WHERE NAME = 'lock_deadlocks'",
        )
        .fetch_one(&mut conn)
        .await
        .expect("lock_deadlocks"),
    }
}
