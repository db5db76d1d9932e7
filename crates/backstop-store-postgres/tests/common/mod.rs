//! What the PostgreSQL tests share: the server from `BACKSTOP_TEST_POSTGRES_URL`, and a fresh
//! schema per test, dropped when its guard goes.

#![allow(dead_code)] // Each test file uses its own part.

use backstop_store_postgres::{PostgresOptions, PostgresStore};
use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// The variable that names the test server, e.g. `postgres://postgres@127.0.0.1:5432/test`.
pub const URL_VAR: &str = "BACKSTOP_TEST_POSTGRES_URL";

/// The test server's URL, if one is configured.
pub fn url() -> Option<String> {
    backstop_store_tests::server::server_url(URL_VAR)
}

/// True (after saying so on stderr) when no server is configured: the test passes untested.
pub fn skip() -> bool {
    backstop_store_tests::server::skip_without(URL_VAR)
}

/// A schema of its own for one test; dropped with everything in it when this goes.
pub struct SchemaGuard {
    pub url: String,
    pub schema: String,
}

impl SchemaGuard {
    /// A new, unique schema name on the test server (not created yet: migrating creates it).
    pub fn new() -> Self {
        let url = url().expect("the test server URL");
        let schema = format!("test_{}", uuid::Uuid::now_v7().simple());
        SchemaGuard { url, schema }
    }

    /// Options for a store on this schema.
    pub fn options(&self) -> PostgresOptions {
        let mut opts = PostgresOptions::from_url(&self.url).expect("valid test URL");
        opts.schema = self.schema.clone();
        opts.max_connections = 8;
        opts
    }

    /// A migrated store on this schema.
    pub async fn store(&self) -> PostgresStore {
        PostgresStore::open_with(self.options())
            .await
            .expect("open the PostgreSQL store")
    }
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, which cannot be blocked on: a thread of its own
        // with a runtime of its own. Best effort: a leftover schema is only clutter.
        let url = PostgresOptions::from_url(&self.url)
            .map(|o| o.url)
            .unwrap_or_default();
        let sql = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.schema);
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                if let Ok(mut conn) = PgConnection::connect(&url).await {
                    let _ = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}
