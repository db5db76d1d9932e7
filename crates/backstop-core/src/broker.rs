//! Brokers as channels: what a bridge consumes into the ledger and where a broker target
//! publishes, as configured. The clients that speak to brokers live in `backstop-brokers`.

use std::fmt;

/// A broker's address as configured, which may hold a password. Its `Debug` and `Display`
/// never show the password.
#[derive(Clone, PartialEq, Eq)]
pub struct BrokerUrl(String);

impl BrokerUrl {
    /// Wraps a URL that has been checked to parse.
    pub fn new(url: impl Into<String>) -> Self {
        BrokerUrl(url.into())
    }

    /// The URL with its password, for connecting only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The scheme (`amqp`, `redis` …), lower-case.
    pub fn scheme(&self) -> String {
        self.0
            .split_once("://")
            .map(|(s, _)| s.to_ascii_lowercase())
            .unwrap_or_default()
    }

    /// The URL with any password replaced by `***`, for logs, listings and errors.
    pub fn redacted(&self) -> String {
        let Some((scheme, rest)) = self.0.split_once("://") else {
            return self.0.clone();
        };
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        match authority.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
                None => self.0.clone(),
            },
            None => self.0.clone(),
        }
    }
}

impl fmt::Debug for BrokerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

impl fmt::Display for BrokerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// Where a broker target publishes a kind's tasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// An AMQP exchange (`""`: the default exchange, where the routing key names the queue).
    Exchange {
        exchange: String,
        routing_key: String,
    },
    /// A Redis list, `LPUSH`ed (consumers pop from the right: first in, first out).
    RedisList { list: String },
    /// A Redis stream, `XADD`ed.
    RedisStream { stream: String },
    /// A Kafka topic, produced to with `acks=all` by an idempotent producer; the business key
    /// is the message key, so one entity's tasks stay in one partition.
    KafkaTopic { topic: String },
    /// A NATS JetStream subject, published with `Nats-Msg-Id` and answered by a PubAck.
    NatsSubject { subject: String },
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::Exchange {
                exchange,
                routing_key,
            } => write!(f, "exchange {exchange:?} routing key {routing_key:?}"),
            Destination::RedisList { list } => write!(f, "list {list:?}"),
            Destination::RedisStream { stream } => write!(f, "stream {stream:?}"),
            Destination::KafkaTopic { topic } => write!(f, "topic {topic:?}"),
            Destination::NatsSubject { subject } => write!(f, "subject {subject:?}"),
        }
    }
}

/// A kind whose tasks are published to a broker: success is the broker's confirmation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerTarget {
    pub broker: BrokerUrl,
    pub destination: Destination,
}

/// What a bridge consumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BridgeSource {
    /// An AMQP queue, consumed with manual acks.
    AmqpQueue(AmqpQueue),
    /// A Redis list, moved item by item into a processing list that survives a crash.
    RedisList {
        list: String,
        /// Where items wait until their task is committed: `backstop:processing:<bridge>`
        /// unless configured.
        processing: String,
    },
    /// A Redis stream, read through a consumer group.
    RedisStream {
        stream: String,
        group: String,
        consumer: String,
        /// Entries another consumer has held this long unacknowledged are claimed.
        claim_idle: std::time::Duration,
    },
    /// A Kafka topic, read by a consumer group whose offsets are committed only up to what
    /// the ledger holds.
    KafkaTopic {
        topic: String,
        /// The consumer group: the bridge's name unless configured.
        group: String,
    },
    /// A NATS JetStream stream, read by a durable pull consumer with explicit acks.
    NatsStream(NatsConsumer),
}

/// A JetStream durable pull consumer and how it is created when it does not exist. An
/// existing consumer is used as it is; its `AckWait`, `MaxDeliver` and `MaxAckPending` rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatsConsumer {
    pub stream: String,
    /// The durable consumer's name.
    pub consumer: String,
    /// The subject filter (`orders.>`); absent: every subject of the stream.
    pub subject: Option<String>,
    /// How long a delivery may stay unacknowledged before it is delivered again.
    pub ack_wait: std::time::Duration,
    /// Deliveries of one message at most (`-1`: no limit); past it the message is poison.
    pub max_deliver: i64,
    /// Unacknowledged deliveries at most, past which JetStream stops delivering.
    pub max_ack_pending: i64,
}

/// An AMQP queue and how it is declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmqpQueue {
    pub queue: String,
    /// `classic` or `quorum`; absent: the broker's default (and an existing queue as it is).
    pub queue_type: Option<String>,
    /// Declared durable (the default) or not.
    pub durable: bool,
    /// `x-dead-letter-exchange` to declare the queue with.
    pub dead_letter_exchange: Option<String>,
    /// Declare the queue (the default) or only check that it exists.
    pub declare: bool,
}

/// Where a message's business key comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// A JSON pointer into the body (RFC 6901), e.g. `/order_id`.
    Pointer(String),
    /// A message header (AMQP) or field of any source that has named fields.
    Header(String),
    /// The message's own id: AMQP `message_id`, a Redis stream entry's id.
    MessageId,
    /// A Redis stream entry's field.
    Field(String),
    /// A Kafka message's key.
    MessageKey,
}

impl KeySource {
    /// Reads `key = …` as configured: a JSON pointer, `header:NAME`, `message_id` or
    /// `field:NAME`.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s == "message_id" {
            return Ok(KeySource::MessageId);
        }
        if s == "message_key" {
            return Ok(KeySource::MessageKey);
        }
        if let Some(name) = s.strip_prefix("header:") {
            return nonempty(name, "header:NAME").map(KeySource::Header);
        }
        if let Some(name) = s.strip_prefix("field:") {
            return nonempty(name, "field:NAME").map(KeySource::Field);
        }
        if s.starts_with('/') {
            return Ok(KeySource::Pointer(s.to_string()));
        }
        Err(format!(
            "{s:?} is not a key source: use a JSON pointer (\"/order_id\"), \"header:NAME\", \"message_id\", \"message_key\" or \"field:NAME\""
        ))
    }
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Pointer(p) => f.write_str(p),
            KeySource::Header(h) => write!(f, "header:{h}"),
            KeySource::MessageId => f.write_str("message_id"),
            KeySource::Field(n) => write!(f, "field:{n}"),
            KeySource::MessageKey => f.write_str("message_key"),
        }
    }
}

fn nonempty(name: &str, form: &str) -> Result<String, String> {
    match name.is_empty() {
        true => Err(format!("{form} needs a name")),
        false => Ok(name.to_string()),
    }
}

/// The kind a bridge's rejected messages are recorded under: `backstop.rejected.<bridge>`.
pub fn rejected_kind(bridge: &str) -> String {
    format!("backstop.rejected.{bridge}")
}

/// One `[bridges.NAME]`: a consumer that puts a broker's messages in the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeConfig {
    pub name: String,
    pub broker: BrokerUrl,
    pub source: BridgeSource,
    /// The configured kind each message becomes.
    pub kind: String,
    pub key: KeySource,
    /// Messages in flight (unacknowledged) at most.
    pub prefetch: u16,
    /// An intake of dead letters: each message becomes a `failed` task of `kind`.
    pub dead_letters: bool,
    /// Largest body taken, in bytes; a larger one is rejected.
    pub max_message: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_never_shown() {
        let u = BrokerUrl::new("amqp://guest:s3cret@127.0.0.1:5672/%2f");
        assert_eq!(u.redacted(), "amqp://guest:***@127.0.0.1:5672/%2f");
        assert!(!format!("{u:?} {u}").contains("s3cret"));
        let plain = BrokerUrl::new("redis://127.0.0.1:6379/0");
        assert_eq!(plain.redacted(), "redis://127.0.0.1:6379/0");
        assert_eq!(
            BrokerUrl::new("redis://:pw@h/0").redacted(),
            "redis://:***@h/0"
        );
    }

    #[test]
    fn key_sources_read_as_configured() {
        assert_eq!(
            KeySource::parse("/order_id"),
            Ok(KeySource::Pointer("/order_id".into()))
        );
        assert_eq!(
            KeySource::parse("header:x-id"),
            Ok(KeySource::Header("x-id".into()))
        );
        assert_eq!(KeySource::parse("message_id"), Ok(KeySource::MessageId));
        assert_eq!(KeySource::parse("message_key"), Ok(KeySource::MessageKey));
        assert_eq!(
            KeySource::parse("field:order"),
            Ok(KeySource::Field("order".into()))
        );
        assert!(
            KeySource::parse("order_id")
                .unwrap_err()
                .contains("JSON pointer")
        );
        assert!(KeySource::parse("header:").is_err());
    }
}
