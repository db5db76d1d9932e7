//! The PostgreSQL store of backstop: several backstop processes share one ledger and its work.
//!
//! Every table lives in one schema (`backstop` unless `?schema=NAME` says otherwise). Claims
//! pick due rows with `FOR UPDATE SKIP LOCKED` through a partial index of pending tasks, so
//! claimers never wait for one another nor share a task; completions are fenced by the claim's
//! `epoch`. Each per-task path (enqueue, claim, completion, heartbeat) is one statement over
//! arrays (`UNNEST`), so a batch costs one round trip and one commit, whatever its size. A
//! write is acknowledged after PostgreSQL's commit, which is durable with the server's default
//! `synchronous_commit = on`. Every insert into `tasks` (the store's, or an outbox insert by
//! an application) notifies the schema's channel at commit; [`Store::watch_work`] listens on
//! it, so that idle engines in every process start new work within milliseconds.

#![warn(missing_docs)]

mod callbacks;
mod claim;
mod complete;
mod connect;
mod enqueue;
mod entities;
mod expire;
mod leader;
mod lease;
mod listener;
mod manual;
mod migrate;
mod read;
mod retention;
mod row;
mod schema;
mod scratch;
mod start;
mod statement_runs;
mod types;
mod watch;

pub use connect::{ACQUIRE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_SCHEMA, PostgresOptions};
pub use scratch::ScratchSchema;

use backstop_core::group_commit::{self, GroupCommit};
use backstop_core::store::*;
use backstop_core::{
    CallbackRecord, Event, ListCallbacksParams, RecordCallbackParams, RecordedCallback, Task,
    TaskId,
};
use schema::Schema;
use sqlx::postgres::PgPool;
use std::sync::Arc;

/// The PostgreSQL ledger. Clones share one connection pool.
#[derive(Clone)]
pub struct PostgresStore {
    db: Arc<Db>,
    /// Gathers concurrent small enqueues into one statement.
    committer: Arc<GroupCommit>,
}

/// What every statement needs: the pool and the schema its SQL names.
pub(crate) struct Db {
    pub(crate) pool: PgPool,
    pub(crate) schema: Schema,
}

impl PostgresStore {
    /// Connects to a `postgres:` URL and applies migrations.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(PostgresOptions::from_url(url)?).await
    }

    /// Connects with explicit options and applies migrations.
    pub async fn open_with(opts: PostgresOptions) -> Result<Self, StoreError> {
        let store = Self::connect(opts).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Connects without migrating (for `backstop migrate` and for checks).
    pub async fn connect(opts: PostgresOptions) -> Result<Self, StoreError> {
        let schema = Schema::new(&opts.schema)?;
        let pool = connect::open(&opts).await?;
        let db = Arc::new(Db { pool, schema });
        let writer = db.clone();
        let (committer, run) = GroupCommit::new(move |tasks, created_at| {
            let db = writer.clone();
            // A task of its own per group, so that groups in flight use both cores.
            let write =
                tokio::spawn(async move { enqueue::enqueue_rows(&db, &tasks, &created_at).await });
            async move {
                write
                    .await
                    .map_err(|e| StoreError::Database(format!("group commit: {e}")))?
            }
        });
        tokio::spawn(run);
        Ok(PostgresStore {
            committer: Arc::new(committer),
            db,
        })
    }

    /// The schema that holds the ledger's tables.
    pub fn schema(&self) -> &str {
        self.db.schema.name()
    }

    /// The newest schema version this build knows (see `schema_migrations`).
    pub fn known_schema_version() -> i64 {
        migrate::known()
    }

    /// Closes the pool's connections, waiting for those in use to be returned.
    pub async fn close(&self) {
        self.db.pool.close().await;
    }
}

pub(crate) fn db_err(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::PoolTimedOut => StoreError::Unavailable(format!(
            "no connection to PostgreSQL within {} s (the server does not answer, or every \
             connection of the pool is busy)",
            connect::ACQUIRE_TIMEOUT.as_secs()
        )),
        e if is_unavailable(e) => StoreError::Unavailable(e.to_string()),
        e => StoreError::Database(e.to_string()),
    }
}

/// Whether `e` says the server cannot take the request now rather than that the request is
/// wrong: no connection (refused, reset, closed pool), or the server refusing writes or
/// connections (SQLSTATE classes 08 connection exception, 53 insufficient resources such as
/// a full disk, 57P shutting down or starting up, and 25006 read-only transaction, as on a
/// standby).
fn is_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(d) => d.code().is_some_and(|c| {
            c.starts_with("08") || c.starts_with("53") || c.starts_with("57P") || c == "25006"
        }),
        _ => false,
    }
}

/// Whether PostgreSQL aborted the statement to break a deadlock (SQLSTATE 40P01).
pub(crate) fn is_deadlock(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == "40P01")
}

impl Store for PostgresStore {
    fn check_writable(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(watch::check_writable(&self.db))
    }

    fn migrate(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(migrate::run(&self.db))
    }

    fn enqueue(&self, p: EnqueueParams) -> BoxFuture<'_, Result<Vec<EnqueueResult>, StoreError>> {
        Box::pin(async move {
            if p.tasks.is_empty() || p.tasks.len() > group_commit::SMALL {
                enqueue::enqueue(&self.db, &p).await
            } else {
                self.committer.submit(p).await
            }
        })
    }

    fn claim(&self, p: ClaimParams) -> BoxFuture<'_, Result<Vec<ClaimedTask>, StoreError>> {
        Box::pin(async move { claim::claim(&self.db, &p).await })
    }

    fn complete(&self, p: CompleteParams) -> BoxFuture<'_, Result<CompleteResult, StoreError>> {
        Box::pin(async move { complete::complete(&self.db, &p).await })
    }

    fn heartbeat(&self, p: HeartbeatParams) -> BoxFuture<'_, Result<Vec<LeaseRef>, StoreError>> {
        Box::pin(async move { lease::heartbeat(&self.db, &p).await })
    }

    fn rescue(&self, p: RescueParams) -> BoxFuture<'_, Result<Vec<Rescued>, StoreError>> {
        Box::pin(async move { lease::rescue(&self.db, &p).await })
    }

    fn expire(&self, p: ExpireParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { expire::expire(&self.db, &p).await })
    }

    fn release(&self, p: ReleaseParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { lease::release(&self.db, &p).await })
    }

    fn get(&self, id: TaskId) -> BoxFuture<'_, Result<Option<Task>, StoreError>> {
        Box::pin(read::get(&self.db, id))
    }

    fn get_by_key<'a>(
        &'a self,
        kind: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Task>, StoreError>> {
        Box::pin(read::get_by_key(&self.db, kind, key))
    }

    fn timeline(&self, id: TaskId) -> BoxFuture<'_, Result<Vec<Event>, StoreError>> {
        Box::pin(read::timeline(&self.db, id))
    }

    fn list(&self, p: ListParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { read::list(&self.db, &p).await })
    }

    fn retry(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move { manual::retry(&self.db, &p).await })
    }

    fn resolve(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move { manual::resolve(&self.db, &p).await })
    }

    fn cancel(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move { manual::cancel(&self.db, &p).await })
    }

    fn redrive(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move { manual::redrive(&self.db, &p).await })
    }

    fn scan(&self, p: ScanParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { read::scan(&self.db, &p).await })
    }

    fn tasks_by_keys(&self, p: KeysParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { read::tasks_by_keys(&self.db, &p).await })
    }

    fn counts<'a>(
        &'a self,
        kind: Option<&'a str>,
    ) -> BoxFuture<'a, Result<StatusCounts, StoreError>> {
        Box::pin(read::counts(&self.db, kind))
    }

    fn acquire_leadership(
        &self,
        p: LeadershipParams,
    ) -> BoxFuture<'_, Result<Leadership, StoreError>> {
        Box::pin(async move { leader::acquire(&self.db, &p).await })
    }

    fn resign_leadership(&self, p: ResignParams) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move { leader::resign(&self.db, &p).await })
    }

    fn prune(&self, p: PruneParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { retention::prune(&self.db, &p).await })
    }

    fn beat(&self, p: BeatParams) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { watch::beat(&self.db, &p).await })
    }

    fn beats<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<Beat>, StoreError>> {
        Box::pin(watch::beats(&self.db, prefix))
    }

    fn forget_beats(&self, p: ForgetBeatsParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { watch::forget_beats(&self.db, &p).await })
    }

    fn backlog(&self, p: BacklogParams) -> BoxFuture<'_, Result<Vec<KindBacklog>, StoreError>> {
        Box::pin(async move { watch::backlog(&self.db, &p).await })
    }

    fn audit_page(&self, p: AuditParams) -> BoxFuture<'_, Result<AuditPage, StoreError>> {
        Box::pin(async move { watch::audit_page(&self.db, &p).await })
    }

    fn record_statement_run(&self, run: StatementRun) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { statement_runs::record(&self.db, &run).await })
    }

    fn statement_runs(
        &self,
        p: StatementRunsParams,
    ) -> BoxFuture<'_, Result<Vec<StatementRun>, StoreError>> {
        Box::pin(async move { statement_runs::list(&self.db, &p).await })
    }

    fn statement_run<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StatementRun>, StoreError>> {
        Box::pin(statement_runs::get(&self.db, id))
    }

    fn transition_entity(
        &self,
        p: TransitionParams,
    ) -> BoxFuture<'_, Result<TransitionOutcome, StoreError>> {
        Box::pin(async move { entities::transition(&self.db, &p).await })
    }

    fn entity(&self, p: EntityParams) -> BoxFuture<'_, Result<Option<EntityHistory>, StoreError>> {
        Box::pin(async move { entities::entity(&self.db, &p).await })
    }

    fn record_callback(
        &self,
        p: RecordCallbackParams,
    ) -> BoxFuture<'_, Result<RecordedCallback, StoreError>> {
        Box::pin(async move { callbacks::record(&self.db, &p).await })
    }

    fn list_callbacks(
        &self,
        p: ListCallbacksParams,
    ) -> BoxFuture<'_, Result<Vec<CallbackRecord>, StoreError>> {
        Box::pin(async move { callbacks::list(&self.db, &p).await })
    }

    fn watch_work(&self, sink: WorkSink) -> Option<BoxFuture<'static, ()>> {
        let connect = (*self.db.pool.connect_options()).clone();
        let channel = listener::channel(self.db.schema.name());
        Some(Box::pin(listener::run(connect, channel, sink)))
    }
}
