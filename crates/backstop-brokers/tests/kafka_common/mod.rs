//! What the Kafka tests share: the broker from `BACKSTOP_TEST_KAFKA_URL`, topics of their own
//! per test (created through the admin API), bridge configs, and plain librdkafka clients to
//! produce and to look at what the clients under test left behind (committed offsets,
//! watermarks, records).
//!
//! Topics are left behind, not deleted: Tansu 0.6 accepts `DeleteTopics`, but while it
//! deletes a topic it answers other consumers' fetches with a leader-change tag and no
//! topic id, which librdkafka 2.12 (Fetch v12, topics by name) looks up with a null name and
//! crashes on (SIGSEGV in `rd_kafka_metadata_update_op`). Tests run in parallel, so any
//! delete would kill the test process. Each topic has a unique name and a few records.

#![allow(dead_code)] // Each test file uses its own part.

use backstop_brokers::{Consumer, Received};
use backstop_core::broker::{BridgeConfig, BridgeSource, BrokerUrl, KeySource};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The test broker's URL, or `None` after saying `skipped:` on stderr.
pub fn url() -> Option<String> {
    match std::env::var("BACKSTOP_TEST_KAFKA_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            eprintln!("skipped: BACKSTOP_TEST_KAFKA_URL is not set");
            None
        }
    }
}

/// `host:port,…` of a `kafka://` URL.
pub fn servers(url: &str) -> String {
    url.split_once("://").map_or(url, |(_, s)| s).to_string()
}

/// A name no other test (or run) uses, ending in `what`.
pub fn unique(what: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("backstop-test-{}-{nanos}-{n}-{what}", std::process::id())
}

fn admin(url: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", servers(url))
        .create()
        .unwrap()
}

/// A topic of the test's own (left on the broker: see the module's doc).
pub struct Topic {
    url: String,
    pub name: String,
}

impl Topic {
    /// Creates a fresh topic of `partitions` partitions (admin `CreateTopics`).
    pub async fn new(url: &str, partitions: i32) -> Self {
        let name = unique("topic");
        let topic = NewTopic::new(&name, partitions, TopicReplication::Fixed(1));
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let results = admin(url)
            .create_topics([&topic], &options)
            .await
            .expect("CreateTopics");
        for r in results {
            r.expect("the topic is created");
        }
        Topic {
            url: url.to_string(),
            name,
        }
    }
}

/// A bridge of `topic` read by consumer group `group`.
pub fn bridge(url: &str, topic: &str, group: &str) -> BridgeConfig {
    BridgeConfig {
        name: "test".into(),
        broker: BrokerUrl::new(url),
        source: BridgeSource::KafkaTopic {
            topic: topic.into(),
            group: group.into(),
        },
        kind: "test.kind".into(),
        key: KeySource::MessageKey,
        prefetch: 64,
        dead_letters: false,
        max_message: 1 << 20,
    }
}

/// A plain producer (acks=all) of the test's own.
pub fn producer(url: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", servers(url))
        .set("acks", "all")
        .create()
        .unwrap()
}

/// Produces one record and waits for its delivery: (partition, offset).
pub async fn produce(
    p: &FutureProducer,
    topic: &str,
    partition: Option<i32>,
    key: &str,
    body: &[u8],
    headers: OwnedHeaders,
) -> (i32, i64) {
    let mut record = FutureRecord::to(topic)
        .key(key)
        .payload(body)
        .headers(headers);
    if let Some(partition) = partition {
        record = record.partition(partition);
    }
    let d = p
        .send(record, Duration::from_secs(10))
        .await
        .map_err(|(e, _)| e)
        .expect("delivered");
    (d.partition, d.offset)
}

/// A plain consumer of `group`, not subscribed: for committed offsets and watermarks, or
/// (with [`BaseConsumer::assign`]) to read records as they are.
pub fn raw_consumer(url: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", servers(url))
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap()
}

/// Group `group`'s committed offset of each partition of `topic` (`None`: none committed).
pub async fn committed(url: &str, group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
    let (url, group, topic) = (url.to_string(), group.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        let c = raw_consumer(&url, &group);
        let mut list = TopicPartitionList::new();
        list.add_partition_range(&topic, 0, partitions - 1);
        let got = c
            .committed_offsets(list, Duration::from_secs(10))
            .expect("committed offsets");
        (0..partitions)
            .map(
                |p| match got.find_partition(&topic, p).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => Some(o),
                    _ => None,
                },
            )
            .collect()
    })
    .await
    .unwrap()
}

/// The high watermark (next offset) of each partition of `topic`.
pub async fn high_watermarks(url: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let (url, topic) = (url.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        let c = raw_consumer(&url, &unique("watermarks"));
        (0..partitions)
            .map(|p| {
                c.fetch_watermarks(&topic, p, Duration::from_secs(10))
                    .expect("watermarks")
                    .1
            })
            .collect()
    })
    .await
    .unwrap()
}

/// The next batch, failing the test after 20 s instead of hanging (a group's first join
/// takes a few seconds).
pub async fn batch(c: &mut Box<dyn Consumer>, max: usize) -> Vec<Received> {
    tokio::time::timeout(Duration::from_secs(20), c.next_batch(max))
        .await
        .expect("a batch within 20 s")
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

/// Whether a batch comes within `wait` (for "nothing more is delivered").
pub async fn nothing_within(c: &mut Box<dyn Consumer>, wait: Duration) -> bool {
    match tokio::time::timeout(wait, c.next_batch(100)).await {
        Err(_) => true,
        Ok(Ok(got)) => {
            eprintln!(
                "unexpected: {:?}",
                got.iter().map(|m| &m.origin).collect::<Vec<_>>()
            );
            false
        }
        Ok(Err(e)) => panic!("next_batch failed: {e}"),
    }
}

/// Closes a consumer the way a bridge does, by dropping it (librdkafka leaves the group),
/// off the runtime's thread as the close blocks.
pub async fn close(c: Box<dyn Consumer>) {
    tokio::task::spawn_blocking(move || drop(c)).await.unwrap();
}
