//! The embedded SQLite store of backstop: WAL, one writer, `BEGIN IMMEDIATE`, group commit.
//!
//! Writes go through a single connection so that SQLite never has to arbitrate between
//! writers inside the process; reads use a small pool that WAL lets run beside the writer.
//! Concurrent single enqueues are coalesced into one transaction (group commit), so each
//! acknowledged enqueue is durable (`synchronous = FULL` by default) without one fsync each.
//! The per-task paths (enqueue, claim, completion) run as direct SQLite calls on the locked
//! writer connection (`raw`), each batch in one transaction.
//!
//! Each concern's narrow trait of [`Store`] is implemented in the module that holds its SQL:
//! `migrate` ([`Migrations`]), `enqueue` ([`Enqueue`]), `read` ([`Tasks`]), `lease`
//! ([`Leases`], with `claim`, `complete` and `start`), `checkpoint` ([`Checkpoints`]), `rescue` ([`Rescue`]), `manual`
//! ([`ManualActions`]), `cluster` ([`Cluster`]), `backlog` ([`Backlog`]), `retention`
//! ([`Retention`]), `statement_runs` ([`Statements`]), `entities` ([`Entities`]), `callbacks`
//! ([`Callbacks`]), `schedules` ([`Schedules`]), and [`WorkWatch`] (none: polling alone) below.

mod backlog;
mod callbacks;
mod checkpoint;
mod claim;
mod claim_limited;
mod cluster;
mod complete;
mod connect;
mod enqueue;
mod entities;
mod groups;
mod lease;
mod limit_overrides;
mod manual;
mod memstatus;
mod migrate;
mod pauses;
#[cfg(test)]
mod plans;
mod raw;
mod read;
mod rescue;
mod retention;
mod row;
mod schedules;
mod shapes;
mod start;
mod statement_runs;
mod stmt_cache;

pub use connect::{Durability, SqliteOptions};

use backstop_core::store::*;
use sqlx::sqlite::SqlitePool;
use sqlx::{Connection, SqliteConnection};
use std::sync::Arc;
use tokio::sync::{Mutex, MutexGuard};

/// The SQLite ledger.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// The writer's kept statements: declared first, so that they are finalised before the
    /// writer connection drops.
    stmts: stmt_cache::StmtCache,
    writer: Mutex<SqliteConnection>,
    readers: SqlitePool,
    committer: enqueue::Committer,
    path: String,
    /// For reopening the writer.
    opts: SqliteOptions,
    /// The writer's page limit now (see [`SqliteStore::set_max_page_count`]).
    max_pages: std::sync::Mutex<Option<u32>>,
}

impl Inner {
    /// Locks the writer connection, first replacing it if a failed transaction left it
    /// unusable. When SQLite rolls a transaction back by itself (`SQLITE_FULL`, some I/O
    /// errors), sqlx's `ROLLBACK` on drop fails and sqlx goes on counting the transaction as
    /// open: every later `begin_with` on that connection would fail. A fresh connection has
    /// nothing open; closing the old one rolls back anything SQLite still held.
    async fn lock_writer(&self) -> Result<MutexGuard<'_, SqliteConnection>, StoreError> {
        let mut w = self.writer.lock().await;
        if w.is_in_transaction() {
            // The rollback of a transaction dropped just now may still be queued on sqlx's
            // worker: a ping lets it run first.
            w.ping().await.map_err(db_err)?;
        }
        if w.is_in_transaction() {
            tracing::warn!(
                path = %self.path,
                "a failed transaction left the writer connection unusable; reopening it"
            );
            let max_pages = *self.max_pages.lock().expect("not poisoned");
            let fresh = connect::writer(&self.opts, max_pages).await?;
            // The kept statements are the old connection's: finalised before it closes.
            self.stmts.clear();
            let old = std::mem::replace(&mut *w, fresh);
            if let Err(e) = old.close().await {
                tracing::warn!(error = %e, "closing the replaced writer connection failed");
            }
        }
        Ok(w)
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at a `sqlite:` URL or plain path, and applies
    /// migrations.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(SqliteOptions::from_url(url)?).await
    }

    /// Opens with explicit options, and applies migrations.
    pub async fn open_with(opts: SqliteOptions) -> Result<Self, StoreError> {
        let store = Self::connect(opts).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Opens without migrating (for `backstop migrate` and for checks).
    pub async fn connect(opts: SqliteOptions) -> Result<Self, StoreError> {
        let (writer, readers) = connect::open(&opts).await?;
        let inner = Arc::new_cyclic(|weak| Inner {
            stmts: Default::default(),
            writer: Mutex::new(writer),
            readers,
            committer: enqueue::Committer::start(weak.clone()),
            path: opts.path.display().to_string(),
            max_pages: std::sync::Mutex::new(opts.max_page_count),
            opts,
        });
        Ok(SqliteStore { inner })
    }

    /// The database file.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// Caps the database file at `pages` pages from now on, or lifts the cap (`None`); see
    /// [`SqliteOptions::max_page_count`]. For tests and fault drills: lower it to make writes
    /// fail as on a full disk, raise it to give the disk back. SQLite never sets the cap
    /// below the file's current size.
    pub async fn set_max_page_count(&self, pages: Option<u32>) -> Result<(), StoreError> {
        let mut w = self.inner.lock_writer().await?;
        // SQLite's own ceiling (SQLITE_MAX_PAGE_COUNT) when there is no cap.
        let n = pages.unwrap_or(4_294_967_294);
        // A pragma takes no parameters; `n` is a number.
        sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA max_page_count = {n}")))
            .execute(&mut *w)
            .await
            .map_err(db_err)?;
        *self.inner.max_pages.lock().expect("not poisoned") = pages;
        Ok(())
    }
}

pub(crate) fn db_err(e: sqlx::Error) -> StoreError {
    let code = e
        .as_database_error()
        .and_then(|d| d.code())
        .and_then(|c| c.parse::<i32>().ok());
    match code {
        Some(rc) if is_unavailable(rc) => StoreError::Unavailable(Cause::new(e)),
        _ => StoreError::Database(Cause::new(e)),
    }
}

/// Whether a result code (primary or extended) says that the file cannot take writes now
/// rather than that the request is wrong: full (`SQLITE_FULL`, a disk or page limit),
/// read-only, an I/O error, a file that cannot be opened, or locked by another process past
/// the busy timeout.
pub(crate) fn is_unavailable(rc: i32) -> bool {
    use libsqlite3_sys as ffi;
    matches!(
        rc & 0xff,
        ffi::SQLITE_FULL
            | ffi::SQLITE_READONLY
            | ffi::SQLITE_IOERR
            | ffi::SQLITE_CANTOPEN
            | ffi::SQLITE_BUSY
    )
}

/// SQLite has no channel that tells one process of another's inserts: engines find new work
/// by polling alone.
impl WorkWatch for SqliteStore {}
