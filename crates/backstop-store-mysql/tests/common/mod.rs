//! What the MySQL tests share: the server from `BACKSTOP_TEST_MYSQL_URL`, and tables of
//! their own per test (a fresh random prefix), dropped when the guard goes.

#![allow(dead_code)] // Each test file uses its own part.

use backstop_store_mysql::{MysqlOptions, MysqlStore};
use sqlx::{AssertSqlSafe, Connection, MySqlConnection};

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
}

impl PrefixGuard {
    /// A new, unique prefix on the test server (no tables yet: migrating creates them).
    pub fn new() -> Self {
        let url = url().expect("the test server URL");
        let prefix = format!("t{}_", uuid::Uuid::now_v7().simple());
        PrefixGuard { url, prefix }
    }

    /// Options for a store on this prefix.
    pub fn options(&self) -> MysqlOptions {
        let mut opts = MysqlOptions::from_url(&self.url).expect("valid test URL");
        opts.prefix = self.prefix.clone();
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
        // Drop runs inside the test's runtime, which cannot be blocked on: a thread of its own
        // with a runtime of its own. Best effort: leftover tables are only clutter.
        let url = MysqlOptions::from_url(&self.url)
            .map(|o| o.url)
            .unwrap_or_default();
        let p = &self.prefix;
        let sql = format!(
            "DROP TABLE IF EXISTS {p}events, {p}tasks, {p}leaders, {p}beats, {p}statement_runs, {p}entities, \
         {p}entity_events, {p}entity_decisions, {p}callbacks, {p}schema"
        );
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                if let Ok(mut conn) = MySqlConnection::connect(&url).await {
                    let _ = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}
