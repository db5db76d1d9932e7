//! What the Redis tests share: the server from `BACKSTOP_TEST_REDIS_URL`, keys of their own
//! per test (deleted when the guard goes, even after a failed assertion), bridge configs and
//! a plain connection to look at what the clients left behind.

#![allow(dead_code)] // Each test file uses its own part.

use backstop_brokers::{Consumer, Received};
use backstop_core::broker::{BridgeConfig, BridgeSource, BrokerUrl, KeySource};
use redis::aio::MultiplexedConnection;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The test server's URL, or `None` after saying `skipped:` on stderr.
pub fn url() -> Option<String> {
    match std::env::var("BACKSTOP_TEST_REDIS_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            eprintln!("skipped: BACKSTOP_TEST_REDIS_URL is not set");
            None
        }
    }
}

/// A plain connection of the test's own.
pub async fn redis(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Key names no other test (or run) uses, deleted on drop.
pub struct Keys {
    url: String,
    names: Vec<String>,
}

impl Keys {
    pub fn new(url: &str) -> Self {
        Keys {
            url: url.to_string(),
            names: Vec::new(),
        }
    }

    /// A fresh key name ending in `what`.
    pub fn name(&mut self, what: &str) -> String {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let n = N.fetch_add(1, Ordering::Relaxed);
        let name = format!("backstop-test:{}:{nanos}:{n}:{what}", std::process::id());
        self.names.push(name.clone());
        name
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        // Blocking is fine here: a test's end.
        let deleted = redis::Client::open(self.url.as_str())
            .and_then(|c| c.get_connection())
            .and_then(|mut c| redis::cmd("DEL").arg(&self.names).exec(&mut c));
        if let Err(e) = deleted {
            eprintln!("could not delete test keys {:?}: {e}", self.names);
        }
    }
}

fn bridge(url: &str, source: BridgeSource) -> BridgeConfig {
    BridgeConfig {
        name: "test".into(),
        broker: BrokerUrl::new(url),
        source,
        kind: "test.kind".into(),
        key: KeySource::MessageId,
        prefetch: 64,
        dead_letters: false,
        max_message: 1 << 20,
    }
}

/// A bridge of a reliable list.
pub fn list_bridge(url: &str, list: &str, processing: &str) -> BridgeConfig {
    let source = BridgeSource::RedisList {
        list: list.into(),
        processing: processing.into(),
    };
    bridge(url, source)
}

/// A bridge of a stream read by `consumer` of `group`.
pub fn stream_bridge(
    url: &str,
    stream: &str,
    group: &str,
    consumer: &str,
    claim_idle: Duration,
) -> BridgeConfig {
    let source = BridgeSource::RedisStream {
        stream: stream.into(),
        group: group.into(),
        consumer: consumer.into(),
        claim_idle,
    };
    bridge(url, source)
}

/// The next batch, failing the test after 10 s instead of hanging.
pub async fn batch(c: &mut Box<dyn Consumer>, max: usize) -> Vec<Received> {
    tokio::time::timeout(Duration::from_secs(10), c.next_batch(max))
        .await
        .expect("a batch within 10 s")
        .expect("a batch")
}

/// Batches until `n` messages have come.
pub async fn receive(c: &mut Box<dyn Consumer>, n: usize) -> Vec<Received> {
    let mut all = Vec::new();
    while all.len() < n {
        all.extend(batch(c, n - all.len()).await);
    }
    all
}

/// The ids of the server's client connections.
pub async fn client_ids(conn: &mut MultiplexedConnection) -> Vec<u64> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(conn)
        .await
        .unwrap();
    list.lines()
        .filter_map(|l| l.strip_prefix("id=")?.split(' ').next()?.parse().ok())
        .collect()
}

/// Kills the connections opened since `before` was taken (the client under test's).
pub async fn kill_clients_since(conn: &mut MultiplexedConnection, before: &[u64]) -> usize {
    let new: Vec<u64> = client_ids(conn)
        .await
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect();
    for id in &new {
        let _: redis::Value = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query_async(conn)
            .await
            .unwrap();
    }
    new.len()
}
