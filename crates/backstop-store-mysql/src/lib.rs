//! The MySQL 8.0.13+ / MariaDB 10.6+ store of backstop: several backstop processes share one
//! ledger and its work.
//!
//! Tables carry a prefix (`backstop_` unless `?prefix=NAME_` says otherwise), so that several
//! ledgers, or a ledger and an application, share a database. Claims pick due rows with
//! `SELECT … FOR UPDATE SKIP LOCKED` through an index of `(status, kind, run_at)` and lease
//! them in the same transaction, so claimers never wait for one another nor share a task;
//! completions are fenced by the claim's `epoch`. Sessions run at READ COMMITTED (no gap
//! locks), and a transaction that loses a lock race (deadlock, lock wait timeout) is tried
//! again a bounded number of times. A write is acknowledged after InnoDB's commit, which is
//! durable with the server's default `innodb_flush_log_at_trx_commit = 1`.
//!
//! Each concern's narrow trait of [`Store`] is implemented in the module that holds its SQL:
//! `migrate` ([`Migrations`]), `enqueue` ([`Enqueue`]), `read` ([`Tasks`]), `lease`
//! ([`Leases`], with `claim`, `complete` and `start`), `checkpoint` ([`Checkpoints`]), `rescue`
//! ([`Rescue`]), `manual` ([`ManualActions`]), `cluster` ([`Cluster`]), `backlog`
//! ([`Backlog`]), `retention` ([`Retention`]), `statement_runs` ([`Statements`]), `entities`
//! ([`Entities`]), `callbacks` ([`Callbacks`]), `schedules` ([`Schedules`]), and
//! [`WorkWatch`] (none: polling alone) below; `groups` promotes within ordering groups for
//! every path that ends tasks.

#![warn(missing_docs)]

mod backlog;
mod callbacks;
mod checkpoint;
mod claim;
mod claim_limited;
mod cluster;
mod complete;
mod connect;
mod ended;
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
mod scratch;
mod shapes;
mod start;
mod statement_runs;
mod tables;
mod tx;

pub use connect::{ACQUIRE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, MysqlOptions};
pub use scratch::ScratchPrefix;
pub use tables::{DEFAULT_PREFIX, MAX_PREFIX_LEN};

use backstop_core::group_commit::GroupCommit;
use backstop_core::store::*;
use sqlx::mysql::MySqlPool;
use std::sync::Arc;
use tables::Tables;

/// The MySQL / MariaDB ledger. Clones share one connection pool.
#[derive(Clone)]
pub struct MysqlStore {
    db: Arc<Db>,
    /// Gathers concurrent small enqueues into one batch.
    committer: Arc<GroupCommit>,
}

/// What every statement needs: the pool and the names of the tables.
pub(crate) struct Db {
    pub(crate) pool: MySqlPool,
    pub(crate) tables: Tables,
    /// Whether enqueued batches are expected to be all new (see `enqueue`).
    pub(crate) optimism: backstop_core::optimism::Optimism,
}

impl MysqlStore {
    /// Connects to a `mysql:` (or `mariadb:`) URL and applies migrations.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(MysqlOptions::from_url(url)?).await
    }

    /// Connects with explicit options and applies migrations.
    pub async fn open_with(opts: MysqlOptions) -> Result<Self, StoreError> {
        let store = Self::connect(opts).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Connects without migrating (for `backstop migrate` and for checks).
    pub async fn connect(opts: MysqlOptions) -> Result<Self, StoreError> {
        let tables = Tables::new(&opts.prefix)?;
        let pool = connect::open(&opts).await?;
        let db = Arc::new(Db {
            pool,
            tables,
            optimism: Default::default(),
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
        Ok(MysqlStore {
            committer: Arc::new(committer),
            db,
        })
    }

    /// The prefix of the ledger's table names.
    pub fn prefix(&self) -> &str {
        self.db.tables.prefix()
    }

    /// The newest schema version this build knows (see `{prefix}schema`).
    pub fn known_schema_version() -> i64 {
        migrate::known()
    }

    /// Closes the pool's connections, waiting for those in use to be returned.
    pub async fn close(&self) {
        self.db.pool.close().await;
    }
}

/// MySQL has no channel that tells one process of another's inserts: engines find new work
/// by polling alone.
impl WorkWatch for MysqlStore {}
