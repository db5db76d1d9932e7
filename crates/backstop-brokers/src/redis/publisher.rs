//! Publishing to a Redis list (`LPUSH`) or stream (`XADD`): the reply is the confirmation.
//!
//! One multiplexed connection per publisher, opened by the first publish and opened again
//! by the first publish after it failed: concurrent publishes are pipelined on it, each
//! answered by its own reply. The lock is held while connecting (one connect, not one per
//! waiting publish), never while a command waits for its reply.

use crate::{BoxFuture, Outgoing, Published, Publisher};
use backstop_core::broker::BrokerUrl;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError, Value};
use std::time::Duration;
use tokio::sync::Mutex;

/// Where a publisher writes.
enum To {
    List(String),
    Stream(String),
}

/// The shared connection, numbered so that a failure drops only the connection it failed on,
/// not a newer one another publish has opened since.
#[derive(Default)]
struct Slot {
    generation: u64,
    conn: Option<MultiplexedConnection>,
}

/// A publisher to one list or stream.
pub(crate) struct RedisPublisher {
    url: BrokerUrl,
    to: To,
    slot: Mutex<Slot>,
}

impl RedisPublisher {
    /// `LPUSH`es to `list`.
    pub(crate) fn list(url: BrokerUrl, list: String) -> Self {
        Self::new(url, To::List(list))
    }

    /// `XADD`s to `stream`.
    pub(crate) fn stream(url: BrokerUrl, stream: String) -> Self {
        Self::new(url, To::Stream(stream))
    }

    fn new(url: BrokerUrl, to: To) -> Self {
        RedisPublisher {
            url,
            to,
            slot: Mutex::new(Slot::default()),
        }
    }

    /// The shared connection and its number, opened when there is none.
    async fn connection(&self) -> Result<(u64, MultiplexedConnection), RedisError> {
        let mut slot = self.slot.lock().await;
        if let Some(conn) = &slot.conn {
            return Ok((slot.generation, conn.clone()));
        }
        // No timeouts of redis-rs's own: each publish has its caller's.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None);
        let conn = redis::Client::open(self.url.expose())?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        slot.generation += 1;
        slot.conn = Some(conn.clone());
        Ok((slot.generation, conn))
    }

    /// Drops connection `generation` if it is still the shared one.
    async fn forget(&self, generation: u64) {
        let mut slot = self.slot.lock().await;
        if slot.generation == generation {
            slot.conn = None;
        }
    }

    fn command(&self, m: &Outgoing<'_>) -> redis::Cmd {
        match &self.to {
            To::List(list) => {
                let mut cmd = redis::cmd("LPUSH");
                cmd.arg(list).arg(m.body);
                cmd
            }
            To::Stream(stream) => {
                let mut cmd = redis::cmd("XADD");
                cmd.arg(stream).arg("*");
                cmd.arg("id").arg(m.id).arg("kind").arg(m.kind);
                cmd.arg("key").arg(m.key).arg("attempt").arg(m.attempt);
                if let Some(tp) = m.traceparent {
                    cmd.arg("traceparent").arg(tp);
                }
                cmd.arg("payload").arg(m.body);
                cmd
            }
        }
    }

    fn describe(&self) -> String {
        match &self.to {
            To::List(l) => format!("LPUSH {l:?} at {}", self.url.redacted()),
            To::Stream(s) => format!("XADD {s:?} at {}", self.url.redacted()),
        }
    }
}

impl Publisher for RedisPublisher {
    fn publish<'a>(&'a self, m: Outgoing<'a>, timeout: Duration) -> BoxFuture<'a, Published> {
        Box::pin(async move {
            let cmd = self.command(&m);
            let mut used = None;
            let attempt = async {
                let (generation, mut conn) = self.connection().await?;
                used = Some(generation);
                cmd.query_async::<Value>(&mut conn).await
            };
            let outcome = tokio::time::timeout(timeout, attempt).await;
            match outcome {
                Ok(Ok(Value::Int(_) | Value::BulkString(_) | Value::SimpleString(_))) => {
                    Published::Confirmed
                }
                Ok(Ok(other)) => {
                    Published::Transient(format!("{}: unexpected reply {other:?}", self.describe()))
                }
                // The server answered: the connection is fine.
                Ok(Err(e)) if e.code().is_some() => {
                    let text = format!("{}: {e}", self.describe());
                    match e.code() {
                        Some("WRONGTYPE" | "NOPERM") => Published::Permanent(text),
                        _ => Published::Transient(text),
                    }
                }
                Ok(Err(e)) => {
                    if let Some(generation) = used {
                        self.forget(generation).await;
                    }
                    Published::Transient(format!("{}: {e}", self.describe()))
                }
                Err(_) => {
                    // No reply in time: the connection may be dead without a reset, and
                    // would fail every publish after this one.
                    if let Some(generation) = used {
                        self.forget(generation).await;
                    }
                    Published::Transient(format!(
                        "{}: no reply within {timeout:?}",
                        self.describe()
                    ))
                }
            }
        })
    }
}
