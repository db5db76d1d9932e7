//! What the PostgreSQL tests share: the server from `BACKSTOP_TEST_POSTGRES_URL`, and a fresh
//! schema per test, dropped when its guard goes.

#![allow(dead_code)] // Each test file uses its own part.

use backstop_store_postgres::{PostgresOptions, PostgresStore, ScratchSchema};

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
    scratch: ScratchSchema,
}

impl SchemaGuard {
    /// A new, unique schema name on the test server (not created yet: migrating creates it).
    pub fn new() -> Self {
        let url = url().expect("the test server URL");
        let scratch = ScratchSchema::new(&url, "test").expect("a scratch schema");
        let schema = scratch.name().to_string();
        SchemaGuard {
            url,
            schema,
            scratch,
        }
    }

    /// Options for a store on this schema.
    pub fn options(&self) -> PostgresOptions {
        let mut opts = self.scratch.options();
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
        // Best effort: a leftover schema is only clutter.
        let _ = self.scratch.drop_all_blocking();
    }
}
