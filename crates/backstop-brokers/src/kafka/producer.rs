//! Publishing to a Kafka topic with an idempotent producer (`enable.idempotence`, so
//! `acks=all` and no duplicates or reordering from librdkafka's own retries): a publish is
//! confirmed by its delivery report, which comes once every in-sync replica has the record.
//!
//! The record's key is the task's business key, so one entity's tasks stay in one partition
//! and in order. Publishes are pipelined: each waits for its own delivery report, while
//! librdkafka batches the records of concurrent publishes into shared produce requests.
//!
//! On a time limit: librdkafka has no per-record timeout, only the producer's
//! `message.timeout.ms`, so the producer is made with the timeout the publish asks for (and
//! made again should a later publish ask for another). Past it, librdkafka fails the record
//! instead of delivering it later; but a record already sent to the broker when the time is
//! up may have been written all the same (librdkafka reports it "possibly persisted"). So a
//! `Transient` after a timeout can be a delivered record: a retry then publishes the task a
//! second time, under the same `backstop-task-id` header, for the consumer to deduplicate.

use super::config::client_config;
use super::record::TASK_ID;
use crate::{BoxFuture, Outgoing, Published, Publisher};
use backstop_core::broker::BrokerUrl;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The shortest `message.timeout.ms`: librdkafka wants it above `linger.ms`.
const MIN_TIMEOUT: Duration = Duration::from_millis(50);

/// librdkafka's default wait for a new topic to appear.
const MAX_PROPAGATION: Duration = Duration::from_secs(30);

/// How long librdkafka waits to fill a batch: short, as each publish waits for its report.
const LINGER: &str = "5";

/// A publisher to one topic. It makes its producer on the first publish.
pub(crate) struct KafkaPublisher {
    url: BrokerUrl,
    topic: String,
    /// The producer and the `message.timeout.ms` it was made with. Making one starts
    /// librdkafka's threads but waits for no broker, so a plain lock is enough.
    producer: Mutex<Option<(Duration, FutureProducer)>>,
}

impl KafkaPublisher {
    /// Publishes to `topic` on the cluster of `url`.
    pub(crate) fn new(url: BrokerUrl, topic: String) -> Self {
        KafkaPublisher {
            url,
            topic,
            producer: Mutex::new(None),
        }
    }

    /// The shared producer for records that may wait `timeout`, made when there is none
    /// (or only one for another timeout: publishes still waiting on it keep it alive).
    fn producer(&self, timeout: Duration) -> Result<FutureProducer, String> {
        let timeout = timeout.max(MIN_TIMEOUT);
        let mut slot = self.producer.lock().unwrap_or_else(PoisonError::into_inner);
        // A producer with a fatal error (the idempotent producer's sequence lost) is
        // replaced, as librdkafka cannot recover it.
        if let Some((t, p)) = slot.as_ref()
            && *t == timeout
            && p.client().fatal_error().is_none()
        {
            return Ok(p.clone());
        }
        let mut config = client_config(&self.url)?;
        config
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", LINGER)
            .set("message.timeout.ms", timeout.as_millis().to_string())
            // How long a topic the broker does not know may take to appear (topic creation
            // propagates through a cluster) before its records fail as unknown: half the
            // wait, so that a missing topic is reported as such, not as a timeout.
            .set(
                "topic.metadata.propagation.max.ms",
                (timeout / 2).min(MAX_PROPAGATION).as_millis().to_string(),
            )
            // A topic that does not exist is an error to report, not one to create on a
            // broker that auto-creates topics (librdkafka's producer asks it to by default).
            .set("allow.auto.create.topics", "false");
        let producer: FutureProducer = config
            .create()
            .map_err(|e| format!("kafka producer for {}: {e}", self.url))?;
        *slot = Some((timeout, producer.clone()));
        Ok(producer)
    }
}

impl Publisher for KafkaPublisher {
    fn publish<'a>(&'a self, m: Outgoing<'a>, timeout: Duration) -> BoxFuture<'a, Published> {
        Box::pin(async move {
            let producer = match self.producer(timeout) {
                Ok(p) => p,
                Err(e) => return Published::Permanent(e),
            };
            let attempt = m.attempt.to_string();
            let mut headers = OwnedHeaders::new_with_capacity(5)
                .insert(header(TASK_ID, m.id))
                .insert(header("backstop-kind", m.kind))
                .insert(header("backstop-key", m.key))
                .insert(header("backstop-attempt", &attempt));
            if let Some(tp) = m.traceparent {
                headers = headers.insert(header("traceparent", tp));
            }
            let record = FutureRecord::to(&self.topic)
                .key(m.key)
                .payload(m.body)
                .headers(headers);
            let delivery = match producer.send_result(record) {
                Ok(d) => d,
                // The local queue is full (or the record refused before it is queued).
                Err((e, _)) => return failed(&self.topic, e),
            };
            match tokio::time::timeout(timeout, delivery).await {
                Ok(Ok(Ok(_))) => Published::Confirmed,
                Ok(Ok(Err((e, _)))) => failed(&self.topic, e),
                Ok(Err(_canceled)) => Published::Transient(format!(
                    "topic {:?}: the producer closed before the delivery report",
                    self.topic
                )),
                Err(_) => Published::Transient(format!(
                    "topic {:?}: no delivery report within {timeout:?}",
                    self.topic
                )),
            }
        })
    }
}

fn header<'a>(key: &'a str, value: &'a str) -> Header<'a, &'a str> {
    Header {
        key,
        value: Some(value),
    }
}

/// A failed record: permanent when retrying the same record cannot help (no such topic, a
/// record the broker will never take), transient otherwise.
fn failed(topic: &str, e: KafkaError) -> Published {
    let text = format!("topic {topic:?}: {e}");
    match e.rdkafka_error_code() {
        Some(
            RDKafkaErrorCode::UnknownTopicOrPartition
            | RDKafkaErrorCode::UnknownTopic
            | RDKafkaErrorCode::UnknownPartition
            | RDKafkaErrorCode::InvalidTopic
            | RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidRecord,
        ) => Published::Permanent(text),
        _ => Published::Transient(text),
    }
}
