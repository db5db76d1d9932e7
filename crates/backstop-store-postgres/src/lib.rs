//! The PostgreSQL store of backstop: several backstop processes share one ledger and its work.
//!
//! Every table lives in one schema (`backstop` unless `?schema=NAME` says otherwise). Claims
//! pick due rows with `FOR UPDATE SKIP LOCKED` through a partial index of pending tasks, so
//! claimers never wait for one another nor share a task; completions are fenced by the claim's
//! `epoch`. Each per-task path (enqueue, claim, completion, heartbeat) is one statement over
//! arrays (`UNNEST`), so a batch costs one round trip and one commit, whatever its size. A
//! write is acknowledged after PostgreSQL's commit, which is durable with the server's default
//! `synchronous_commit = on`. Every insert into `tasks` (the store's, or an outbox insert by
//! an application) notifies the schema's channel at commit; [`WorkWatch::watch_work`] listens
//! on it, so that idle engines in every process start new work within milliseconds.
//!
//! Each concern's narrow trait of [`Store`] is implemented in the module that holds its SQL:
//! `migrate` ([`Migrations`]), `enqueue` ([`Enqueue`]), `read` ([`Tasks`]), `lease`
//! ([`Leases`], with `claim`, `complete` and `start`), `checkpoint` ([`Checkpoints`]), `rescue`
//! ([`Rescue`]), `manual` ([`ManualActions`]), `cluster` ([`Cluster`]), `backlog`
//! ([`Backlog`]), `retention` ([`Retention`]), `statement_runs` ([`Statements`]), `entities`
//! ([`Entities`]), `callbacks` ([`Callbacks`]), `schedules` ([`Schedules`]) and `watch`
//! ([`WorkWatch`]).

#![warn(missing_docs)]

mod backlog;
mod callbacks;
mod checkpoint;
mod claim;
mod claim_limited;
mod claim_lock;
mod cluster;
mod complete;
mod connect;
mod enqueue;
mod entities;
mod groups;
mod lease;
mod limit_overrides;
mod manual;
mod migrate;
mod pauses;
#[cfg(test)]
mod plans;
mod read;
mod rescue;
mod retention;
mod row;
mod schedules;
mod schema;
mod scratch;
mod start;
mod statement_runs;
mod types;
mod watch;

pub use connect::{ACQUIRE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_SCHEMA, PostgresOptions};
pub use scratch::ScratchSchema;

use backstop_core::group_commit::GroupCommit;
use backstop_core::store::*;
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
    /// Whether enqueued batches are expected to be all new (see `enqueue`).
    pub(crate) optimism: backstop_core::optimism::Optimism,
    /// The keys of the advisory locks limited claims take.
    pub(crate) claim_locks: claim_lock::ClaimLocks,
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
        let db = Arc::new(Db {
            pool,
            schema,
            optimism: Default::default(),
            claim_locks: Default::default(),
        });
        let writer = db.clone();
        let (committer, run) = GroupCommit::new(move |tasks, created_at| {
            let db = writer.clone();
            // A task of its own per group, so that groups in flight use both cores.
            let write =
                tokio::spawn(async move { enqueue::enqueue_rows(&db, &tasks, &created_at).await });
            async move {
                write
                    .await
                    .map_err(|e| StoreError::Database(Cause::with_context("group commit", e)))?
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
    if matches!(e, sqlx::Error::PoolTimedOut) {
        // The driver's error says only that it timed out: this says what that means.
        StoreError::Unavailable(Cause::msg(format!(
            "no connection to PostgreSQL within {} s (the server does not answer, or every \
             connection of the pool is busy)",
            connect::ACQUIRE_TIMEOUT.as_secs()
        )))
    } else if is_unavailable(&e) {
        StoreError::Unavailable(Cause::new(e))
    } else {
        StoreError::Database(Cause::new(e))
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
