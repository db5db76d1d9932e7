//! What passes through a broker: a message received, and one to publish.

use std::collections::BTreeMap;

/// Names one received message to its consumer's [`Consumer::ack`](crate::Consumer::ack).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AckToken(pub u64);

/// One message as a consumer received it.
#[derive(Clone, Debug)]
pub struct Received {
    /// The body's exact bytes (a Redis stream entry: its body field, or its fields as a
    /// JSON object).
    pub body: Vec<u8>,
    /// AMQP `message_id`; a Redis stream entry's id.
    pub message_id: Option<String>,
    /// A Kafka message's key, as its bytes.
    pub message_key: Option<Vec<u8>>,
    /// AMQP headers (strings as they are, other values as JSON); a stream entry's fields.
    pub headers: BTreeMap<String, String>,
    /// Where it came from, for the task's first event: queue, routing key, `redelivered`,
    /// `x-death`, `x-delivery-count`, a stream entry's delivery count …
    pub origin: serde_json::Map<String, serde_json::Value>,
    /// A broker's own death record says it is a dead letter (`x-death` on AMQP): the first
    /// reason, e.g. `rejected from queue "sms" (count 3)`.
    pub death: Option<String>,
    /// The broker gave up delivering it (JetStream past `MaxDeliver`): why, in words
    /// starting `poison`. It enters the ledger as a `failed` task of the bridge's kind.
    pub poison: Option<String>,
    /// Hand back to [`Consumer::ack`](crate::Consumer::ack) once its task is committed.
    pub token: AckToken,
}

/// One task to publish.
#[derive(Clone, Copy, Debug)]
pub struct Outgoing<'a> {
    /// The task id: AMQP `message_id` and header `backstop-task-id`; a stream field `id`.
    pub id: &'a str,
    pub kind: &'a str,
    pub key: &'a str,
    pub attempt: u32,
    pub traceparent: Option<&'a str>,
    /// The payload's exact bytes.
    pub body: &'a [u8],
    /// How long ago the task was enqueued. No earlier attempt can have published it longer
    /// ago than this, so a retry within a broker's deduplication window of it is certainly
    /// deduplicated (JetStream's `Nats-Msg-Id` window).
    pub since_enqueued: std::time::Duration,
}
