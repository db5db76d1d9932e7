//! backstop makes asynchronous work accountable: every async business operation is a row in
//! a durable ledger keyed by its business id, driven to an end and never silently lost.
//!
//! This crate is the embedding facade and the `backstop` binary. Its Cargo features pick what
//! an embedder compiles: `sqlite` (on by default), `postgres` and `mysql` (the stores `open_store`
//! can open), `server` (the HTTP API, as `backstop::server`) and `cli` (on by default: the binary,
//! which needs all of them). An embedder that wants only SQLite writes
//! `backstop = { version = "0.1", default-features = false, features = ["sqlite"] }`.
//! To embed:
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

#[cfg(feature = "cli")]
pub mod config;
mod signal;
#[cfg(feature = "cli")]
pub mod view;

/// The HTTP API (`backstop serve`'s routes), for serving it from an embedding process.
#[cfg(feature = "server")]
pub use backstop_server as server;

pub use backstop_core::store::{EntityHistory, TransitionOutcome};
pub use backstop_core::{
    Answer, Clock, Entity, EntityDecision, Event, EventType, KindConfig, Machine, MachineError,
    ManualClock, Outcome, RetryPolicy, Status, Store, StoreError, SystemClock, Target, Task,
    TaskId,
};
pub use backstop_engine::{
    CheckpointError, Engine, EngineBuilder, EngineOptions, EnqueueError, EnqueueRequest, Enqueued,
    Handler, ManualRequest, TaskContext, TransitionError, TransitionRequest, handler,
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
///
/// A scheme whose store this build leaves out (its Cargo feature is off) is an error that names
/// the feature to enable.
pub async fn connect_store(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    let scheme = url.split(':').next().unwrap_or("");
    match scheme {
        #[cfg(feature = "sqlite")]
        "sqlite" => {
            let opts = backstop_store_sqlite::SqliteOptions::from_url(url)?;
            Ok(Arc::new(
                backstop_store_sqlite::SqliteStore::connect(opts).await?,
            ))
        }
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => {
            let opts = backstop_store_postgres::PostgresOptions::from_url(url)?;
            Ok(Arc::new(
                backstop_store_postgres::PostgresStore::connect(opts).await?,
            ))
        }
        #[cfg(feature = "mysql")]
        "mysql" | "mariadb" => {
            let opts = backstop_store_mysql::MysqlOptions::from_url(url)?;
            Ok(Arc::new(
                backstop_store_mysql::MysqlStore::connect(opts).await?,
            ))
        }
        _ => Err(StoreError::Open(match missing_feature(scheme) {
            // The URL may carry a password: the message names only its scheme.
            Some((store, feature)) => format!(
                "{scheme}: URLs need the {store} store, which this build of backstop leaves out: \
                 enable the backstop crate's `{feature}` feature"
            )
            .into(),
            None => format!(
                "{url:?}: unknown database URL scheme (expected sqlite:, postgres: or mysql:)"
            )
            .into(),
        })),
    }
}

/// The store and the Cargo feature a known scheme needs, when that feature is off.
fn missing_feature(scheme: &str) -> Option<(&'static str, &'static str)> {
    match scheme {
        #[cfg(not(feature = "sqlite"))]
        "sqlite" => Some(("SQLite", "sqlite")),
        #[cfg(not(feature = "postgres"))]
        "postgres" | "postgresql" => Some(("PostgreSQL", "postgres")),
        #[cfg(not(feature = "mysql"))]
        "mysql" | "mariadb" => Some(("MySQL", "mysql")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_error(url: &str) -> String {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        match rt.block_on(connect_store(url)) {
            Ok(_) => panic!("{url} opened"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_unknown_scheme_names_the_schemes() {
        let msg = open_error("redis://localhost/0");
        assert!(msg.contains("unknown database URL scheme"), "{msg}");
    }

    #[cfg(not(feature = "postgres"))]
    #[test]
    fn a_postgres_url_without_the_feature_names_it() {
        for url in [
            "postgres://u:secret@localhost/db",
            "postgresql://u:secret@localhost/db",
        ] {
            let msg = open_error(url);
            assert!(msg.contains("PostgreSQL store"), "{msg}");
            assert!(msg.contains("`postgres` feature"), "{msg}");
            assert!(!msg.contains("secret"), "{msg}");
        }
    }

    #[cfg(not(feature = "mysql"))]
    #[test]
    fn a_mysql_url_without_the_feature_names_it() {
        for url in ["mysql://root@localhost/db", "mariadb://root@localhost/db"] {
            let msg = open_error(url);
            assert!(msg.contains("MySQL store"), "{msg}");
            assert!(msg.contains("`mysql` feature"), "{msg}");
        }
    }

    #[cfg(not(feature = "sqlite"))]
    #[test]
    fn a_sqlite_url_without_the_feature_names_it() {
        let msg = open_error("sqlite://backstop.db");
        assert!(msg.contains("SQLite store"), "{msg}");
        assert!(msg.contains("`sqlite` feature"), "{msg}");
    }
}
