//! Plain librdkafka clients for the Kafka suites: topics of their own (left on the broker:
//! Tansu 0.6 crashes running librdkafka consumers while it deletes a topic), records read
//! back as they are, committed offsets and high watermarks.

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::{Headers as _, Message as _};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// `host:port,…` of a `kafka://` URL.
pub fn servers(url: &str) -> String {
    url.split_once("://").map_or(url, |(_, s)| s).to_string()
}

/// Creates a topic of `partitions` partitions named `name`.
pub async fn create_topic(url: &str, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", servers(url))
        .create()
        .unwrap();
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin.create_topics([&topic], &options).await.unwrap() {
        r.unwrap();
    }
}

fn consumer(url: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", servers(url))
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap()
}

/// Group `group`'s committed offset per partition (`-1`: none).
pub async fn committed(url: &str, group: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let (url, group, topic) = (url.to_string(), group.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        let mut list = TopicPartitionList::new();
        list.add_partition_range(&topic, 0, partitions - 1);
        let got = consumer(&url, &group)
            .committed_offsets(list, Duration::from_secs(10))
            .unwrap();
        (0..partitions)
            .map(
                |p| match got.find_partition(&topic, p).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => o,
                    _ => -1,
                },
            )
            .collect()
    })
    .await
    .unwrap()
}

/// The high watermark (next offset) per partition.
pub async fn high_watermarks(url: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let (url, topic) = (url.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        let c = consumer(&url, "backstop-test-watermarks");
        (0..partitions)
            .map(|p| {
                c.fetch_watermarks(&topic, p, Duration::from_secs(10))
                    .unwrap()
                    .1
            })
            .collect()
    })
    .await
    .unwrap()
}

/// One record as stored.
#[derive(Debug, Clone)]
pub struct Record {
    pub partition: i32,
    pub key: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

/// Every record of `topic`'s `partitions`, read from the start (up to `limit`).
pub async fn read_all(url: &str, topic: &str, partitions: i32, limit: Duration) -> Vec<Record> {
    let (url, topic) = (url.to_string(), topic.to_string());
    let ends = high_watermarks(&url, &topic, partitions).await;
    tokio::task::spawn_blocking(move || {
        let c = consumer(&url, "backstop-test-reader");
        let mut list = TopicPartitionList::new();
        for p in 0..partitions {
            list.add_partition_offset(&topic, p, Offset::Beginning)
                .unwrap();
        }
        c.assign(&list).unwrap();
        let want: i64 = ends.iter().sum();
        let mut out = Vec::new();
        let deadline = Instant::now() + limit;
        while (out.len() as i64) < want && Instant::now() < deadline {
            let Some(m) = c.poll(Duration::from_millis(200)) else {
                continue;
            };
            let m = m.unwrap();
            let mut headers = BTreeMap::new();
            if let Some(h) = m.headers() {
                for x in h.iter() {
                    let v = x.value.map(|v| String::from_utf8_lossy(v).into_owned());
                    headers.insert(x.key.to_string(), v.unwrap_or_default());
                }
            }
            out.push(Record {
                partition: m.partition(),
                key: m.key().map(|k| String::from_utf8_lossy(k).into_owned()),
                headers,
                body: m.payload().unwrap_or_default().to_vec(),
            });
        }
        out
    })
    .await
    .unwrap()
}
