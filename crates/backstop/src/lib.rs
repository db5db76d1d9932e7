//! backstop makes asynchronous work accountable: every async business operation is a row in
//! a durable ledger keyed by its business id, driven to an end and never silently lost.
//!
//! This crate is the embedding facade and the `backstop` binary. To embed:
//!
//! ```no_run
//! use backstop::{Engine, EnqueueRequest, KindConfig, Outcome, Target, handler, open_store};
//!
//! # async fn demo() -> anyhow::Result<()> {
//! let store = open_store("sqlite://backstop.db").await?;
//! let engine = Engine::builder(store)
//!     .kind(KindConfig::new("sms.send", Target::InProcess))
//!     .handler("sms.send", handler(|task| async move {
//!         println!("sending {}", task.key);
//!         Outcome::Success
//!     }))
//!     .build()?;
//! engine
//!     .enqueue(EnqueueRequest {
//!         kind: "sms.send".into(),
//!         key: "order-123".into(),
//!         payload: br#"{"to":"+15550100"}"#.to_vec(),
//!         ..Default::default()
//!     })
//!     .await?;
//! engine.run(backstop::shutdown_signal()).await;
//! # Ok(()) }
//! ```

pub mod config;
/// The path `[sources.NAME]` had before `config` became a folder.
pub use config::sources as config_sources;
mod signal;
pub mod view;

pub use backstop_core::store::{EntityHistory, TransitionOutcome};
pub use backstop_core::{
    Answer, Clock, Entity, EntityDecision, Event, EventType, KindConfig, Machine, MachineError,
    ManualClock, Outcome, RetryPolicy, Status, Store, StoreError, SystemClock, Target, Task,
    TaskId,
};
pub use backstop_engine::{
    Engine, EngineBuilder, EngineOptions, EnqueueError, EnqueueRequest, Enqueued, Handler,
    ManualRequest, TaskContext, TransitionError, TransitionRequest, handler,
};
pub use signal::shutdown_signal;

use std::sync::Arc;

/// The database used when none is given: a SQLite file in the working directory.
pub const DEFAULT_DATABASE: &str = "sqlite://backstop.db";

/// Opens (and migrates) the ledger at `url`; the scheme picks the backend.
pub async fn open_store(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    let store = connect_store(url).await?;
    store.migrate().await?;
    Ok(store)
}

/// Opens the ledger at `url` without migrating it.
pub async fn connect_store(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    let scheme = url.split(':').next().unwrap_or("");
    match scheme {
        "sqlite" => {
            let opts = backstop_store_sqlite::SqliteOptions::from_url(url)?;
            Ok(Arc::new(
                backstop_store_sqlite::SqliteStore::connect(opts).await?,
            ))
        }
        "postgres" | "postgresql" => {
            let opts = backstop_store_postgres::PostgresOptions::from_url(url)?;
            Ok(Arc::new(
                backstop_store_postgres::PostgresStore::connect(opts).await?,
            ))
        }
        "mysql" | "mariadb" => {
            let opts = backstop_store_mysql::MysqlOptions::from_url(url)?;
            Ok(Arc::new(
                backstop_store_mysql::MysqlStore::connect(opts).await?,
            ))
        }
        _ => Err(StoreError::Open(format!(
            "{url:?}: unknown database URL scheme (expected sqlite:, postgres: or mysql:)"
        ))),
    }
}
