//! Scratch ledgers for tests, benches and harnesses: tables under a fresh, unique prefix on a
//! MySQL/MariaDB server, a store opened on them, and dropping them again. The SQL lives here,
//! next to the table list it must match ([`TABLES`](crate::tables::TABLES)), so that callers
//! never write their own `DROP TABLE` and cannot leave a newer table behind.

use crate::MysqlStore;
use crate::connect::MysqlOptions;
use crate::tables::Tables;
use crate::tx::db_err;
use backstop_core::{Cause, StoreError};
use sqlx::{Connection, MySqlConnection};

/// Tables of their own on a server, under a prefix no one else uses: `{label}_{16 hex}_`.
/// Nothing exists until a store opens on it (migrating creates the tables); nothing is dropped
/// until [`ScratchPrefix::drop_all`] (or its blocking twin) is called.
#[derive(Clone, Debug)]
pub struct ScratchPrefix {
    /// The server URL as given, backstop's own parameters included.
    server: String,
    /// Options for a store on the scratch prefix.
    opts: MysqlOptions,
    tables: Tables,
}

impl ScratchPrefix {
    /// A fresh prefix on the server at `url` (a `mysql:` or `mariadb:` URL; a `prefix=` in it
    /// is overridden). `label` says whose tables these are (`test`, `bench`, …); with the
    /// random part and the underscores the prefix must stay within
    /// [`MAX_PREFIX_LEN`](crate::MAX_PREFIX_LEN), so `label` has at most 22 bytes.
    pub fn new(url: &str, label: &str) -> Result<Self, StoreError> {
        let mut opts = MysqlOptions::from_url(url)?;
        // The random tail of a UUIDv7 (the head is the clock, shared by prefixes made in the
        // same millisecond): 16 hex digits keep long labels within the prefix limit.
        let unique = uuid::Uuid::now_v7().simple().to_string();
        opts.prefix = format!("{label}_{}_", &unique[16..]);
        // Checks the prefix too: a label too long or not of identifier characters fails here.
        let tables = Tables::new(&opts.prefix)?;
        Ok(ScratchPrefix {
            server: url.to_string(),
            opts,
            tables,
        })
    }

    /// The prefix, e.g. `bench_8f3a…_`.
    pub fn prefix(&self) -> &str {
        &self.opts.prefix
    }

    /// Options for a store on the scratch tables (the server's, with this prefix).
    pub fn options(&self) -> MysqlOptions {
        self.opts.clone()
    }

    /// The URL of the scratch ledger, for [`MysqlStore::open`] or `backstop --database`: the
    /// server's URL as given with `prefix=` added.
    pub fn url(&self) -> String {
        let sep = if self.server.contains('?') { '&' } else { '?' };
        format!("{}{sep}prefix={}", self.server, self.prefix())
    }

    /// Opens a store on the scratch tables, creating them (migrating) if needed.
    pub async fn open(&self) -> Result<MysqlStore, StoreError> {
        MysqlStore::open_with(self.options()).await
    }

    /// Brings the optimizer's statistics of the busy tables up to date, as a long-running
    /// server's background analysis would: a bench then measures the same plans on an empty
    /// and on a prefilled ledger.
    pub async fn settle(&self) -> Result<(), StoreError> {
        let mut conn = self.connection().await?;
        let analyzed = sqlx::raw_sql(self.tables.q("ANALYZE TABLE {tasks}, {events}"))
            .execute(&mut conn)
            .await
            .map_err(db_err);
        let _ = conn.close().await;
        analyzed.map(|_| ())
    }

    /// Drops every table the store's migrations create under this prefix (those that exist).
    /// Tables the migrations do not create are left alone, even under this prefix.
    pub async fn drop_all(&self) -> Result<(), StoreError> {
        let names: Vec<&str> = self.tables.names().collect();
        // Only checked prefixes and the crate's own table names go into the statement.
        let sql = format!("DROP TABLE IF EXISTS {}", names.join(", "));
        let mut conn = self.connection().await?;
        let dropped = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut conn)
            .await
            .map_err(db_err);
        let _ = conn.close().await;
        dropped.map(|_| ())
    }

    /// [`ScratchPrefix::drop_all`] for a `Drop` impl: a test's guard is dropped inside the
    /// test's runtime, which cannot be blocked on, so this runs on a thread and a runtime of
    /// its own and waits for them.
    pub fn drop_all_blocking(&self) -> Result<(), StoreError> {
        let scratch = self.clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| StoreError::Database(Cause::with_context("a runtime to drop in", e)))?
                .block_on(scratch.drop_all())
        })
        .join()
        .map_err(|_| StoreError::Database("the thread dropping the tables panicked".into()))?
    }

    /// One connection of its own (no pool, no session settings: DDL needs neither).
    async fn connection(&self) -> Result<MySqlConnection, StoreError> {
        MySqlConnection::connect(&self.opts.url)
            .await
            .map_err(|e| StoreError::Open(Cause::with_context("MySQL", e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tables on the server whose names start with `prefix`.
    async fn tables_with(url: &str, prefix: &str) -> Vec<String> {
        let mut conn = MySqlConnection::connect(&MysqlOptions::from_url(url).unwrap().url)
            .await
            .unwrap();
        let mut names: Vec<String> = sqlx::query_scalar(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name LIKE ?",
        )
        // A prefix is letters, digits and '_': only '_' needs escaping in LIKE.
        .bind(format!("{}%", prefix.replace('_', "\\_")))
        .fetch_all(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
        names.sort();
        names
    }

    #[test]
    fn prefixes_are_unique_and_within_the_limit() {
        let url = "mysql://root@127.0.0.1:3306/test?prefix=app_&max_connections=3";
        let (a, b) = (
            ScratchPrefix::new(url, "bench").unwrap(),
            ScratchPrefix::new(url, "bench").unwrap(),
        );
        assert_ne!(a.prefix(), b.prefix());
        assert!(a.prefix().starts_with("bench_") && a.prefix().ends_with('_'));
        assert_eq!(a.options().max_connections, 3);
        assert_eq!(a.url(), format!("{url}&prefix={}", a.prefix()));
        assert!(ScratchPrefix::new(url, &"l".repeat(22)).is_ok());
        assert!(ScratchPrefix::new(url, &"l".repeat(23)).is_err());
        assert!(ScratchPrefix::new(url, "a-b").is_err());
    }

    /// Every table the migrations create is one of [`TABLES`], and dropping leaves none of
    /// them behind. Runs against `BACKSTOP_TEST_MYSQL_URL` (passes untested without it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_leaves_no_table_of_the_migrations_behind() {
        let Some(url) = std::env::var("BACKSTOP_TEST_MYSQL_URL")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            eprintln!("skipped: BACKSTOP_TEST_MYSQL_URL is not set");
            return;
        };
        let scratch = ScratchPrefix::new(&url, "scratch").unwrap();
        assert!(tables_with(&url, scratch.prefix()).await.is_empty());
        let store = scratch.open().await.unwrap();
        store.close().await;
        let mut expected: Vec<String> = scratch.tables.names().map(String::from).collect();
        expected.sort();
        assert_eq!(
            tables_with(&url, scratch.prefix()).await,
            expected,
            "the migrations create exactly the tables of TABLES"
        );
        scratch.settle().await.unwrap();
        scratch.drop_all().await.unwrap();
        assert_eq!(
            tables_with(&url, scratch.prefix()).await,
            Vec::<String>::new()
        );
        // Dropping what is already gone is no error (a guard may drop after a failed open).
        scratch.drop_all_blocking().unwrap();
    }
}
