//! The embedded SQLite store of backstop: WAL, one writer, `BEGIN IMMEDIATE`, group commit.
//!
//! Writes go through a single connection so that SQLite never has to arbitrate between
//! writers inside the process; reads use a small pool that WAL lets run beside the writer.
//! Concurrent single enqueues are coalesced into one transaction (group commit), so each
//! acknowledged enqueue is durable (`synchronous = FULL` by default) without one fsync each.
//! The per-task paths (enqueue, claim, completion) run as direct SQLite calls on the locked
//! writer connection (`raw`), each batch in one transaction.

mod callbacks;
mod claim;
mod complete;
mod connect;
mod enqueue;
mod entities;
mod leader;
mod lease;
mod manual;
mod migrate;
#[cfg(test)]
mod plans;
mod probe;
mod raw;
mod read;
mod retention;
mod row;
mod shapes;
mod start;
mod statement_runs;
mod watch;

pub use connect::{Durability, SqliteOptions};

use backstop_core::store::*;
use backstop_core::{
    CallbackRecord, Event, ListCallbacksParams, RecordCallbackParams, RecordedCallback, Task,
    TaskId,
};
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
        Some(rc) if is_unavailable(rc) => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Database(e.to_string()),
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

impl Store for SqliteStore {
    fn migrate(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            migrate::run(&mut w).await
        })
    }

    fn check_writable(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            probe::check_writable(&mut w).await
        })
    }

    fn enqueue(&self, p: EnqueueParams) -> BoxFuture<'_, Result<Vec<EnqueueResult>, StoreError>> {
        Box::pin(self.inner.committer.submit(p))
    }

    fn claim(&self, p: ClaimParams) -> BoxFuture<'_, Result<Vec<ClaimedTask>, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            claim::claim(&mut w, &p).await
        })
    }

    fn complete(&self, p: CompleteParams) -> BoxFuture<'_, Result<CompleteResult, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            complete::complete(&mut w, &p).await
        })
    }

    fn heartbeat(&self, p: HeartbeatParams) -> BoxFuture<'_, Result<Vec<LeaseRef>, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            lease::heartbeat(&mut w, &p).await
        })
    }

    fn rescue(&self, p: RescueParams) -> BoxFuture<'_, Result<Vec<Rescued>, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            lease::rescue(&mut w, &p).await
        })
    }

    fn expire(&self, p: ExpireParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            lease::expire(&mut w, &p).await
        })
    }

    fn release(&self, p: ReleaseParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            lease::release(&mut w, &p).await
        })
    }

    fn get(&self, id: TaskId) -> BoxFuture<'_, Result<Option<Task>, StoreError>> {
        Box::pin(read::get(&self.inner.readers, id))
    }

    fn get_by_key<'a>(
        &'a self,
        kind: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Task>, StoreError>> {
        Box::pin(read::get_by_key(&self.inner.readers, kind, key))
    }

    fn timeline(&self, id: TaskId) -> BoxFuture<'_, Result<Vec<Event>, StoreError>> {
        Box::pin(read::timeline(&self.inner.readers, id))
    }

    fn list(&self, p: ListParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { read::list(&self.inner.readers, &p).await })
    }

    fn retry(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            manual::retry(&mut w, &p).await
        })
    }

    fn resolve(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            manual::resolve(&mut w, &p).await
        })
    }

    fn cancel(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            manual::cancel(&mut w, &p).await
        })
    }

    fn redrive(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            manual::redrive(&mut w, &p).await
        })
    }

    fn scan(&self, p: ScanParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { read::scan(&self.inner.readers, &p).await })
    }

    fn tasks_by_keys(&self, p: KeysParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { read::tasks_by_keys(&self.inner.readers, &p).await })
    }

    fn counts<'a>(
        &'a self,
        kind: Option<&'a str>,
    ) -> BoxFuture<'a, Result<StatusCounts, StoreError>> {
        Box::pin(read::counts(&self.inner.readers, kind))
    }

    fn acquire_leadership(
        &self,
        p: LeadershipParams,
    ) -> BoxFuture<'_, Result<Leadership, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            leader::acquire(&mut w, &p).await
        })
    }

    fn resign_leadership(&self, p: ResignParams) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            leader::resign(&mut w, &p).await
        })
    }

    fn prune(&self, p: PruneParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { retention::prune(&self.inner, &p).await })
    }

    fn beat(&self, p: BeatParams) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            watch::beat(&mut w, &p).await
        })
    }

    fn beats<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<Beat>, StoreError>> {
        Box::pin(watch::beats(&self.inner.readers, prefix))
    }

    fn forget_beats(&self, p: ForgetBeatsParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            watch::forget_beats(&mut w, &p).await
        })
    }

    fn backlog(&self, p: BacklogParams) -> BoxFuture<'_, Result<Vec<KindBacklog>, StoreError>> {
        Box::pin(async move { watch::backlog(&self.inner.readers, &p).await })
    }

    fn audit_page(&self, p: AuditParams) -> BoxFuture<'_, Result<AuditPage, StoreError>> {
        Box::pin(async move { watch::audit_page(&self.inner.readers, &p).await })
    }

    fn record_statement_run(&self, run: StatementRun) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            statement_runs::record(&mut w, &run).await
        })
    }

    fn statement_runs(
        &self,
        p: StatementRunsParams,
    ) -> BoxFuture<'_, Result<Vec<StatementRun>, StoreError>> {
        Box::pin(async move { statement_runs::list(&self.inner.readers, &p).await })
    }

    fn statement_run<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StatementRun>, StoreError>> {
        Box::pin(statement_runs::get(&self.inner.readers, id))
    }

    fn transition_entity(
        &self,
        p: TransitionParams,
    ) -> BoxFuture<'_, Result<TransitionOutcome, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            entities::transition(&mut w, &p).await
        })
    }

    fn entity(&self, p: EntityParams) -> BoxFuture<'_, Result<Option<EntityHistory>, StoreError>> {
        Box::pin(async move { entities::entity(&self.inner.readers, &p).await })
    }

    fn record_callback(
        &self,
        p: RecordCallbackParams,
    ) -> BoxFuture<'_, Result<RecordedCallback, StoreError>> {
        Box::pin(self.inner.committer.record_callback(p))
    }

    fn list_callbacks(
        &self,
        p: ListCallbacksParams,
    ) -> BoxFuture<'_, Result<Vec<CallbackRecord>, StoreError>> {
        Box::pin(async move { callbacks::list(&self.inner.readers, &p).await })
    }
}
