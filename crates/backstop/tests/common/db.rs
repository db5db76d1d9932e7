//! A database of their own for the server-backed end-to-end tests: a fresh schema on the
//! PostgreSQL test server, or a fresh table prefix on the MySQL/MariaDB one, dropped (with
//! everything in it) when the guard goes. The store crates' scratch API makes and drops them.

use backstop_store_mysql::ScratchPrefix;
use backstop_store_postgres::ScratchSchema;

/// Which test server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    Postgres,
    Mysql,
}

impl Server {
    /// The variable that names the test server.
    pub fn url_var(self) -> &'static str {
        match self {
            Server::Postgres => "BACKSTOP_TEST_POSTGRES_URL",
            Server::Mysql => "BACKSTOP_TEST_MYSQL_URL",
        }
    }
}

/// A schema (PostgreSQL) or table prefix (MySQL) of its own on a test server.
pub struct TestDb {
    pub server: Server,
    scratch: Scratch,
    /// The schema or the prefix.
    pub name: String,
}

/// The store crate's scratch ledger behind a [`TestDb`].
enum Scratch {
    Postgres(ScratchSchema),
    Mysql(ScratchPrefix),
}

impl TestDb {
    /// A fresh schema or prefix on the configured server; `None` (after printing a `skipped:`
    /// line) when the server's variable is not set.
    pub fn new(server: Server) -> Option<TestDb> {
        let var = server.url_var();
        if backstop_store_tests::server::skip_without(var) {
            return None;
        }
        let base = backstop_store_tests::server::server_url(var)?;
        let (scratch, name) = match server {
            Server::Postgres => {
                let s = ScratchSchema::new(&base, "test").expect("a scratch schema");
                let name = s.name().to_string();
                (Scratch::Postgres(s), name)
            }
            Server::Mysql => {
                let s = ScratchPrefix::new(&base, "t").expect("a scratch prefix");
                let name = s.prefix().to_string();
                (Scratch::Mysql(s), name)
            }
        };
        Some(TestDb {
            server,
            scratch,
            name,
        })
    }

    /// The ledger URL `backstop` opens: the server's URL with `schema=` or `prefix=`.
    pub fn url(&self) -> String {
        match &self.scratch {
            Scratch::Postgres(s) => s.url(),
            Scratch::Mysql(s) => s.url(),
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Best effort: leftovers are only clutter.
        let _ = match &self.scratch {
            Scratch::Postgres(s) => s.drop_all_blocking(),
            Scratch::Mysql(s) => s.drop_all_blocking(),
        };
    }
}
