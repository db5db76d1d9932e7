//! Opening the database file: one writer connection and a pool of readers, both in WAL mode.

use backstop_core::StoreError;
use backstop_core::store::Cause;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, SqliteConnection};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// How hard a commit tries to reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous = FULL`: every commit is fsynced; survives power loss. The default.
    #[default]
    Full,
    /// `synchronous = NORMAL`: survives a crash of the process, but a power loss may lose
    /// the last commits. Only by explicit choice.
    Normal,
}

/// Where and how to open the SQLite ledger.
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    pub path: PathBuf,
    pub durability: Durability,
    /// Reader connections beside the single writer.
    pub readers: u32,
    /// Caps the database file at this many pages (`PRAGMA max_page_count` on the writer; a
    /// page is 8 KiB in a new file): a write that needs more fails as on a full disk
    /// (`SQLITE_FULL`). For tests and fault drills (the chaos harness's disk-full case); change
    /// it at run time with [`SqliteStore::set_max_page_count`](crate::SqliteStore). `None`, the
    /// default, leaves SQLite's own limit. In a URL: `?max_page_count=N`.
    pub max_page_count: Option<u32>,
}

impl SqliteOptions {
    /// Options for a file path with the defaults.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SqliteOptions {
            path: path.into(),
            durability: Durability::Full,
            readers: 4,
            max_page_count: None,
        }
    }

    /// Reads `sqlite://relative.db`, `sqlite:///absolute.db`, `sqlite:file.db` or a plain path,
    /// with optional `?durability=full|normal` and `max_page_count=N` (joined by `&`).
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        let rest = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .unwrap_or(url);
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (rest, None),
        };
        if path.is_empty() || path == ":memory:" {
            return Err(StoreError::Open(
                format!(
                    "{url:?}: give a file path (an in-memory database cannot hold a durable ledger)"
                )
                .into(),
            ));
        }
        let mut opts = SqliteOptions::new(path);
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            match pair.split_once('=') {
                Some(("durability", "full")) => opts.durability = Durability::Full,
                Some(("durability", "normal")) => opts.durability = Durability::Normal,
                Some(("max_page_count", n)) => {
                    opts.max_page_count =
                        Some(n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                            StoreError::Open(
                                format!(
                                    "{url:?}: max_page_count={n}: expected a whole number above 0"
                                )
                                .into(),
                            )
                        })?);
                }
                _ => {
                    return Err(StoreError::Open(
                        format!(
                            "{url:?}: unknown option {pair:?} (known: durability=full|normal, \
                         max_page_count=N)"
                        )
                        .into(),
                    ));
                }
            }
        }
        Ok(opts)
    }
}

/// The options every connection shares.
fn base(opts: &SqliteOptions) -> Result<SqliteConnectOptions, StoreError> {
    // Every connection's options are built here, before it opens.
    crate::memstatus::off();
    Ok(SqliteConnectOptions::from_str("sqlite:")
        .map_err(|e| open_err(opts, e))?
        .filename(&opts.path)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(match opts.durability {
            Durability::Full => SqliteSynchronous::Full,
            Durability::Normal => SqliteSynchronous::Normal,
        })
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(false)
        // For a new file only. Measured with the store_phases example: 8 KiB pages cut the
        // CPU per task by about 8% against 4 KiB (fewer page splits and WAL frames per
        // batch); 16 KiB gained nothing more.
        .page_size(8192)
        .pragma("cache_size", "-32768")
        .pragma("temp_store", "memory")
        .statement_cache_capacity(256)
        .log_statements(tracing::log::LevelFilter::Trace))
}

fn open_err(opts: &SqliteOptions, e: sqlx::Error) -> StoreError {
    StoreError::Open(Cause::with_context(opts.path.display(), e))
}

/// Opens the writer connection (creating the file if needed), with the page limit `max_pages`
/// if there is one.
pub(crate) async fn writer(
    opts: &SqliteOptions,
    max_pages: Option<u32>,
) -> Result<SqliteConnection, StoreError> {
    let mut connect = base(opts)?.create_if_missing(true);
    if let Some(n) = max_pages {
        connect = connect.pragma("max_page_count", n.to_string());
    }
    connect.connect().await.map_err(|e| open_err(opts, e))
}

pub(crate) async fn open(
    opts: &SqliteOptions,
) -> Result<(SqliteConnection, SqlitePool), StoreError> {
    let writer = writer(opts, opts.max_page_count).await?;
    let readers = SqlitePoolOptions::new()
        .max_connections(opts.readers.max(1))
        .min_connections(0)
        .connect_with(base(opts)?.read_only(true))
        .await
        .map_err(|e| open_err(opts, e))?;
    Ok((writer, readers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_options_are_read() {
        let o =
            SqliteOptions::from_url("sqlite://l.db?durability=normal&max_page_count=64").unwrap();
        assert_eq!(o.durability, Durability::Normal);
        assert_eq!(o.max_page_count, Some(64));
        assert_eq!(
            SqliteOptions::from_url("l.db").unwrap().max_page_count,
            None
        );
        for bad in [
            "l.db?max_page_count=0",
            "l.db?max_page_count=x",
            "l.db?pages=1",
        ] {
            assert!(
                matches!(SqliteOptions::from_url(bad), Err(StoreError::Open(_))),
                "{bad}"
            );
        }
    }
}
