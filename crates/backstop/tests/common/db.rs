//! A database of their own for the server-backed end-to-end tests: a fresh schema on the
//! PostgreSQL test server, or a fresh table prefix on the MySQL/MariaDB one, dropped (with
//! everything in it) when the guard goes.

use backstop::TaskId;
use sqlx::{AssertSqlSafe, Connection, MySqlConnection, PgConnection};

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
    base: String,
    /// The schema or the prefix.
    pub name: String,
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
        let unique = TaskId::new().0.simple().to_string();
        let name = match server {
            Server::Postgres => format!("test_{unique}"),
            Server::Mysql => format!("t{unique}_"),
        };
        Some(TestDb { server, base, name })
    }

    /// The ledger URL `backstop` opens: the server's URL with `schema=` or `prefix=`.
    pub fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        let key = match self.server {
            Server::Postgres => "schema",
            Server::Mysql => "prefix",
        };
        format!("{}{sep}{key}={}", self.base, self.name)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, which cannot be blocked on: a thread of its own
        // with a runtime of its own. Best effort: leftovers are only clutter.
        let (server, base, name) = (self.server, self.base.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                match server {
                    Server::Postgres => {
                        let sql = format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE");
                        if let Ok(mut conn) = PgConnection::connect(&base).await {
                            let _ = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await;
                            let _ = conn.close().await;
                        }
                    }
                    Server::Mysql => {
                        let Ok(opts) = backstop_store_mysql::MysqlOptions::from_url(&base) else {
                            return;
                        };
                        let Ok(mut conn) = MySqlConnection::connect(&opts.url).await else {
                            return;
                        };
                        // Every table with the prefix (the name is hex and '_', so only the
                        // underscore needs escaping in LIKE).
                        let pattern = format!("{}%", name.replace('_', "\\_"));
                        let tables: Vec<String> = sqlx::query_scalar(
                            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                             WHERE table_schema = DATABASE() AND table_name LIKE ?",
                        )
                        .bind(pattern)
                        .fetch_all(&mut conn)
                        .await
                        .unwrap_or_default();
                        if !tables.is_empty() {
                            let sql = format!("DROP TABLE IF EXISTS {}", tables.join(", "));
                            let _ = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut conn).await;
                        }
                        let _ = conn.close().await;
                    }
                }
            });
        })
        .join();
    }
}
