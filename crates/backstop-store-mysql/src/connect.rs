//! Where and how to reach the server: options, URL parsing, the connection pool and the
//! session settings every connection gets.

use crate::tables::{DEFAULT_PREFIX, check_prefix};
use backstop_core::StoreError;
use backstop_core::store::Cause;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor};
use std::str::FromStr;
use std::time::Duration;

/// How long a request waits for a connection of the pool before it fails as
/// [`StoreError::Unavailable`]: long enough for a busy pool to hand one over, short enough
/// that a caller hears promptly that the server is away (the driver retries a refused
/// connection until then).
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Pool size when none is given.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;

/// Where and how to open the MySQL / MariaDB ledger.
#[derive(Clone, Debug)]
pub struct MysqlOptions {
    /// A `mysql://user:password@host:port/database` URL, without backstop's own options.
    pub url: String,
    /// Prepended to every table name (ASCII letters, digits and `_`; at most 40 bytes).
    pub prefix: String,
    /// Most connections the pool opens.
    pub max_connections: u32,
}

impl MysqlOptions {
    /// Reads `mysql://…/database` or `mariadb://…/database`, with backstop's options in the
    /// query: `prefix=NAME_` (default `backstop_`) and `max_connections=N` (default 10).
    /// Other query options (`ssl-mode`, `socket`, …) are passed on to the driver.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        let rest = url
            .strip_prefix("mysql://")
            .or_else(|| url.strip_prefix("mariadb://"))
            .ok_or_else(|| {
                StoreError::Open(
                    format!("{}: expected a mysql:// or mariadb:// URL", redact(url)).into(),
                )
            })?;
        let (base, query) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let database = base.split_once('/').map(|(_, d)| d).unwrap_or("");
        if database.is_empty() {
            return Err(StoreError::Open(
                format!(
                    "{}: name the database, e.g. mysql://user@host:3306/backstop",
                    redact(url)
                )
                .into(),
            ));
        }
        let mut opts = MysqlOptions {
            url: String::new(),
            prefix: DEFAULT_PREFIX.to_string(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        };
        let mut passed = Vec::new();
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            match pair.split_once('=') {
                Some(("prefix", p)) => opts.prefix = p.to_string(),
                Some(("max_connections", n)) => {
                    opts.max_connections = n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        StoreError::Open(
                            format!(
                                "{}: max_connections must be a positive integer, got {n:?}",
                                redact(url)
                            )
                            .into(),
                        )
                    })?;
                }
                _ if pair.is_empty() => {}
                _ => passed.push(pair),
            }
        }
        check_prefix(&opts.prefix)?;
        opts.url = format!("mysql://{base}");
        if !passed.is_empty() {
            opts.url = format!("{}?{}", opts.url, passed.join("&"));
        }
        Ok(opts)
    }
}

/// The URL with any password replaced, for messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}{}", &rest[authority_end..])
        }
        None => url.to_string(),
    }
}

/// Every connection of the pool runs these first.
///
/// READ COMMITTED: locking reads and updates take no gap locks, so enqueues and claims of
/// different rows never wait for one another (and deadlock far less); every statement sees
/// the latest committed rows. Strict mode: an over-long value is an error, never truncated.
const SESSION: [&str; 2] = [
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET SESSION sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')",
];

pub(crate) async fn open(opts: &MysqlOptions) -> Result<MySqlPool, StoreError> {
    let url = redact(&opts.url);
    let open_err = |e: sqlx::Error| StoreError::Open(Cause::with_context(&url, e));
    let connect = MySqlConnectOptions::from_str(&opts.url)
        .map_err(open_err)?
        .charset("utf8mb4")
        .timezone(Some("+00:00".to_string()))
        .statement_cache_capacity(256)
        .log_statements(tracing::log::LevelFilter::Trace)
        .log_slow_statements(tracing::log::LevelFilter::Warn, Duration::from_secs(2));
    // One connection first, outside the pool: a wrong address, password or database fails
    // at once (the pool would keep trying until its acquire timeout), and the server's
    // version is checked before anything else runs.
    let mut first = connect.connect().await.map_err(open_err)?;
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut first)
        .await
        .map_err(open_err)?;
    let _ = first.close().await;
    check_version(&version).map_err(|e| StoreError::Open(format!("{url}: {e}").into()))?;
    let pool = MySqlPoolOptions::new()
        .max_connections(opts.max_connections.max(1))
        .min_connections(0)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                for sql in SESSION {
                    conn.execute(sql).await?;
                }
                Ok(())
            })
        })
        .connect_lazy_with(connect);
    Ok(pool)
}

/// `FOR UPDATE SKIP LOCKED` needs MySQL 8.0.1 or MariaDB 10.6; the outbox's expression
/// column defaults need MySQL 8.0.13.
fn check_version(version: &str) -> Result<(), String> {
    let nums: Vec<u32> = version
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map(|n| n.parse().unwrap_or(0))
        .collect();
    let v = (
        nums.first().copied().unwrap_or(0),
        nums.get(1).copied().unwrap_or(0),
        nums.get(2).copied().unwrap_or(0),
    );
    let (ok, need) = if version.to_ascii_lowercase().contains("mariadb") {
        (v >= (10, 6, 0), "MariaDB 10.6")
    } else {
        (v >= (8, 0, 13), "MySQL 8.0.13")
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "server version {version} is too old: backstop needs {need} or newer (SKIP LOCKED, expression defaults)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_options_are_taken_out_and_the_rest_passed_on() {
        let o = MysqlOptions::from_url(
            "mariadb://root:pw@127.0.0.1:3306/test?prefix=app_&ssl-mode=disabled&max_connections=4",
        )
        .unwrap();
        assert_eq!(o.prefix, "app_");
        assert_eq!(o.max_connections, 4);
        assert_eq!(
            o.url,
            "mysql://root:pw@127.0.0.1:3306/test?ssl-mode=disabled"
        );
        let d = MysqlOptions::from_url("mysql://root@localhost/db").unwrap();
        assert_eq!(d.prefix, DEFAULT_PREFIX);
        assert_eq!(d.max_connections, DEFAULT_MAX_CONNECTIONS);
        assert_eq!(d.url, "mysql://root@localhost/db");
    }

    #[test]
    fn old_servers_are_refused() {
        assert!(check_version("8.0.12").is_err());
        assert!(check_version("8.0.13").is_ok());
        assert!(check_version("10.5.19-MariaDB").is_err());
        assert!(check_version("10.11.6-MariaDB-0+deb12u1").is_ok());
    }

    #[test]
    fn bad_urls_are_refused_without_echoing_the_password() {
        for bad in [
            "postgres://u@h/db",
            "mysql://u:secret@h:3306",
            "mysql://u:secret@h/",
            "mysql://u:secret@h/db?prefix=a-b",
            "mysql://u:secret@h/db?max_connections=0",
        ] {
            match MysqlOptions::from_url(bad) {
                Err(StoreError::Open(msg)) => assert!(!msg.contains("secret"), "{msg}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn versions_without_skip_locked_are_refused() {
        assert!(check_version("10.11.19-MariaDB-0+deb12u1").is_ok());
        assert!(check_version("10.6.0-MariaDB").is_ok());
        assert!(check_version("10.5.23-MariaDB-log").is_err());
        assert!(check_version("8.0.36").is_ok());
        assert!(check_version("8.4.0-commercial").is_ok());
        assert!(check_version("5.7.44-log").is_err());
    }
}
