//! Where the ledger lives: the server URL, the schema that holds its tables, the pool size;
//! and opening the connection pool.

use crate::schema::Schema;
use backstop_core::StoreError;
use backstop_core::store::Cause;
use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use std::str::FromStr;
use std::time::Duration;

/// The schema used when none is given.
pub const DEFAULT_SCHEMA: &str = "backstop";

/// How long a request waits for a connection of the pool before it fails as
/// [`StoreError::Unavailable`]: long enough for a busy pool to hand one over, short enough
/// that a caller hears promptly that the server is away (the driver retries a refused
/// connection until then). The first connection, at open, has as long.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections in the pool when none is given.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;

/// Where and how to open the PostgreSQL ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresOptions {
    /// The connection URL as libpq-style clients read it (`postgres://user@host/db?sslmode=…`),
    /// without backstop's own parameters.
    pub url: String,
    /// The schema that holds the ledger's tables: lower-case letters, digits and `_`, not
    /// starting with a digit, at most 63 bytes.
    pub schema: String,
    /// The most connections the pool opens.
    pub max_connections: u32,
}

impl PostgresOptions {
    /// Options for a connection URL with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresOptions {
            url: url.into(),
            schema: DEFAULT_SCHEMA.into(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }

    /// Reads a `postgres:` or `postgresql:` URL. backstop's own query parameters are
    /// `schema=NAME` and `max_connections=N`; every other one is passed to the driver.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        if !(url.starts_with("postgres:") || url.starts_with("postgresql:")) {
            return Err(StoreError::Open(
                "expected a postgres:// or postgresql:// URL".into(),
            ));
        }
        let (base, query) = match url.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (url, None),
        };
        let mut opts = PostgresOptions::new(base);
        let mut passed = Vec::new();
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            match pair.split_once('=') {
                Some(("schema", name)) => opts.schema = name.to_string(),
                Some(("max_connections", n)) => {
                    opts.max_connections = n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        StoreError::Open(
                            format!("max_connections={n}: expected a whole number above 0").into(),
                        )
                    })?;
                }
                _ if pair.is_empty() => {}
                _ => passed.push(pair),
            }
        }
        if !passed.is_empty() {
            opts.url = format!("{base}?{}", passed.join("&"));
        }
        Schema::new(&opts.schema)?;
        Ok(opts)
    }
}

/// Opens the pool (one connection at once, so that a wrong URL fails here).
pub(crate) async fn open(opts: &PostgresOptions) -> Result<PgPool, StoreError> {
    // The URL may hold a password: errors name only what the driver reports.
    let connect = PgConnectOptions::from_str(&opts.url)
        .map_err(|e| StoreError::Open(format!("bad PostgreSQL URL: {e}").into()))?;
    let connect = match connect.get_application_name() {
        Some(_) => connect,
        None => connect.application_name("backstop"),
    }
    .log_statements(tracing::log::LevelFilter::Trace);
    let target = format!(
        "PostgreSQL at {}:{}{}",
        connect.get_host(),
        connect.get_port(),
        connect
            .get_database()
            .map(|d| format!("/{d}"))
            .unwrap_or_default()
    );
    // One connection first, outside the pool: a wrong address, password or database fails
    // at once with the driver's reason ("connection refused"), where the pool would retry
    // until its acquire timeout and then say only that it timed out.
    let open_err = |e: sqlx::Error| StoreError::Open(Cause::with_context(&target, e));
    let first = tokio::time::timeout(ACQUIRE_TIMEOUT, connect.connect())
        .await
        .map_err(|_| {
            StoreError::Open(
                format!("{target}: no answer within {} s", ACQUIRE_TIMEOUT.as_secs()).into(),
            )
        })?
        .map_err(open_err)?;
    let _ = sqlx::Connection::close(first).await;
    Ok(PgPoolOptions::new()
        .max_connections(opts.max_connections.max(1))
        .min_connections(0)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_lazy_with(connect))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backstop_parameters_are_taken_out_of_the_url() {
        let o = PostgresOptions::from_url(
            "postgres://u:p@db:5433/app?sslmode=require&schema=ledger_2&max_connections=4",
        )
        .unwrap();
        assert_eq!(o.url, "postgres://u:p@db:5433/app?sslmode=require");
        assert_eq!(o.schema, "ledger_2");
        assert_eq!(o.max_connections, 4);
        let o = PostgresOptions::from_url("postgresql://db/app").unwrap();
        assert_eq!(o, PostgresOptions::new("postgresql://db/app"));
        assert_eq!(o.schema, "backstop");
    }

    #[test]
    fn bad_options_are_refused() {
        for url in [
            "postgres://db/app?schema=Robert%27%3B",
            "postgres://db/app?schema=",
            "postgres://db/app?schema=a.b",
            "postgres://db/app?max_connections=0",
            "postgres://db/app?max_connections=x",
            "mysql://db/app",
        ] {
            assert!(
                matches!(PostgresOptions::from_url(url), Err(StoreError::Open(_))),
                "{url}"
            );
        }
    }
}
