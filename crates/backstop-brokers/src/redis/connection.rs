//! Opening connections, and what a failed Redis call means to a consumer.

use crate::BrokerError;
use backstop_core::broker::BrokerUrl;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError};
use std::time::Duration;

/// How long a blocking read waits on the server before it returns nil and the loop goes on.
pub(crate) const BLOCK: Duration = Duration::from_millis(1500);

/// Margin past [`BLOCK`] on a blocking connection's response timeout: redis-rs's default of
/// 500 ms would fail a 1.5 s block while the server still moves the item, yet some timeout
/// is wanted so that a server gone silent (no RST) is noticed.
const BLOCK_MARGIN: Duration = Duration::from_secs(10);

/// How long a consumer's other commands (`LRANGE`, `LREM`, `XACK` …) may take: longer than
/// redis-rs's 500 ms, since a timeout costs a reconnect and a batch delivered again.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens a multiplexed connection; `blocking` for one that waits in `BLMOVE`/`XREADGROUP
/// BLOCK` (its response timeout outlasts the block).
pub(crate) async fn open(
    url: &BrokerUrl,
    blocking: bool,
) -> Result<MultiplexedConnection, BrokerError> {
    let context = || format!("connecting to Redis at {}", url.redacted());
    let client =
        redis::Client::open(url.expose()).map_err(|e| BrokerError::connection(context(), e))?;
    let timeout = match blocking {
        true => BLOCK + BLOCK_MARGIN,
        false => COMMAND_TIMEOUT,
    };
    let config = AsyncConnectionConfig::new().set_response_timeout(Some(timeout));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| BrokerError::connection(context(), e))
}

/// A failed call of a consumer: a key of another type cannot be fixed by reconnecting
/// (`Config`); anything else (a lost connection, a timeout, a missing group) may be.
pub(crate) fn failed(context: impl Into<String>, e: RedisError) -> BrokerError {
    let context = context.into();
    match e.code() {
        Some("WRONGTYPE") => BrokerError::Config(format!("{context}: {e}")),
        _ => BrokerError::connection(context, e),
    }
}

/// Refuses a key that holds another type than `want` (a missing key is fine: the first push
/// creates it).
pub(crate) async fn check_type(
    conn: &mut MultiplexedConnection,
    key: &str,
    want: &str,
) -> Result<(), BrokerError> {
    let found: String = redis::cmd("TYPE")
        .arg(key)
        .query_async(conn)
        .await
        .map_err(|e| failed(format!("TYPE {key:?}"), e))?;
    match found.as_str() {
        "none" => Ok(()),
        t if t == want => Ok(()),
        t => Err(BrokerError::Config(format!(
            "Redis key {key:?} holds a {t}, not a {want}"
        ))),
    }
}
