//! `[bridges.NAME]`: consumers that put a broker's messages in the ledger. Each names its
//! broker, what it consumes (an AMQP `queue`, a Redis list `queue`, or a Redis `stream` with a
//! `group`), the configured `kind` each message becomes and where the business `key` comes
//! from. Checked when the file is read.

use super::{ConfigError, Invalid, bridge_sources};
use backstop_brokers::{BrokerKind, check_url};
use backstop_core::broker::{BridgeConfig, BridgeSource, BrokerUrl, KeySource, rejected_kind};
use backstop_core::{KindConfig, validate};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Default unacknowledged messages per bridge.
const DEFAULT_PREFETCH: u16 = 64;
/// Default largest message: 1 MiB.
const DEFAULT_MAX_MESSAGE: usize = 1 << 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBridge {
    pub(super) broker: Option<String>,
    pub(super) queue: Option<String>,
    pub(super) stream: Option<String>,
    pub(super) group: Option<String>,
    pub(super) consumer: Option<String>,
    pub(super) processing: Option<String>,
    pub(super) kind: Option<String>,
    pub(super) key: Option<String>,
    pub(super) prefetch: Option<u16>,
    pub(super) dead_letters: Option<bool>,
    pub(super) queue_type: Option<String>,
    pub(super) durable: Option<bool>,
    pub(super) dead_letter_exchange: Option<String>,
    pub(super) declare: Option<bool>,
    pub(super) max_message: Option<usize>,
    pub(super) claim_idle: Option<String>,
    pub(super) topic: Option<String>,
    pub(super) subject: Option<String>,
    pub(super) ack_wait: Option<String>,
    pub(super) max_deliver: Option<i64>,
    pub(super) max_ack_pending: Option<i64>,
}

/// Checks every bridge against the configured kinds; an error names the key
/// (`bridges."sms-in".queue`).
pub(super) fn bridges(
    raw: BTreeMap<String, RawBridge>,
    kinds: &[KindConfig],
    invalid: Invalid,
) -> Result<Vec<BridgeConfig>, ConfigError> {
    let mut out = Vec::new();
    for (name, b) in raw {
        let at = |field: &str| format!("bridges.{name:?}.{field}");
        validate::kind(&rejected_kind(&name)).map_err(|e| {
            invalid(
                format!("bridges.{name:?}"),
                format!("the name makes the kind of its rejects, backstop.rejected.{name}: {e}"),
            )
        })?;
        let url = b
            .broker
            .clone()
            .ok_or_else(|| invalid(at("broker"), "missing: the broker's URL".into()))?;
        let broker_kind = check_url(&url).map_err(|m| invalid(at("broker"), m))?;
        let kind = b.kind.clone().ok_or_else(|| {
            invalid(
                at("kind"),
                "missing: the configured kind each message becomes".into(),
            )
        })?;
        if !kinds.iter().any(|k| k.name == kind) {
            let mut names: Vec<&str> = kinds.iter().map(|k| k.name.as_str()).collect();
            names.sort();
            return Err(invalid(
                at("kind"),
                format!(
                    "{kind:?} is not a configured kind (configured: {})",
                    names.join(", ")
                ),
            ));
        }
        let prefetch = b.prefetch.unwrap_or(DEFAULT_PREFETCH);
        if prefetch == 0 {
            return Err(invalid(at("prefetch"), "must be at least 1".into()));
        }
        let source = bridge_sources::only_its_keys(&b, broker_kind, &at)
            .and_then(|()| match broker_kind {
                BrokerKind::Amqp => bridge_sources::amqp(&b, &at),
                BrokerKind::Redis => bridge_sources::redis(&b, &name, &at),
                BrokerKind::Kafka => bridge_sources::kafka(&b, &name, &at),
                BrokerKind::Nats => bridge_sources::nats(&b, &name, prefetch, &at),
            })
            .map_err(|(key, m)| invalid(key, m))?;
        let key = match (&b.key, &source) {
            (Some(k), _) => KeySource::parse(k).map_err(|m| invalid(at("key"), m))?,
            (None, BridgeSource::RedisList { .. }) => {
                return Err(invalid(
                    at("key"),
                    "missing: a list item has no id, so name its key: a JSON pointer (\"/order_id\")".into(),
                ));
            }
            (None, BridgeSource::KafkaTopic { .. }) => KeySource::MessageKey,
            (None, _) => KeySource::MessageId,
        };
        if matches!(&key, KeySource::Field(_))
            && !matches!(&source, BridgeSource::RedisStream { .. })
        {
            return Err(invalid(
                at("key"),
                "field:NAME is a Redis stream entry's field; use header:NAME or a JSON pointer"
                    .into(),
            ));
        }
        if matches!(&key, KeySource::MessageKey)
            && !matches!(&source, BridgeSource::KafkaTopic { .. })
        {
            return Err(invalid(
                at("key"),
                "message_key is a Kafka message's key; use message_id, header:NAME or a JSON pointer"
                    .into(),
            ));
        }
        out.push(BridgeConfig {
            name: name.clone(),
            broker: BrokerUrl::new(url),
            source,
            kind,
            key,
            prefetch,
            dead_letters: b.dead_letters.unwrap_or(false),
            max_message: b.max_message.unwrap_or(DEFAULT_MAX_MESSAGE),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::config::tests::assert_refused;
    use backstop_core::broker::{BridgeSource, KeySource};

    const KINDS: &str = "[kinds.\"sms.send\"]\ntarget = \"pull\"\n";

    #[test]
    fn reads_the_bridges_of_the_contract() {
        let c = Config::parse(
            &format!(
                r#"{KINDS}
            [bridges.sms-in]
            broker = "amqp://guest:guest@127.0.0.1:5672/%2f"
            queue = "sms.requests"
            kind = "sms.send"
            key = "/order_id"
            prefetch = 64
            dead_letters = false
            [bridges.sms-list]
            broker = "redis://127.0.0.1:6379/0"
            queue = "sms"
            kind = "sms.send"
            key = "header:x-id"
            [bridges.sms-stream]
            broker = "redis://127.0.0.1:6379/0"
            stream = "sms"
            group = "backstop"
            kind = "sms.send"
            key = "field:order"
            "#
            ),
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.bridges.len(), 3);
        let amqp = &c.bridges[0];
        assert_eq!(amqp.name, "sms-in");
        assert_eq!(amqp.key, KeySource::Pointer("/order_id".into()));
        assert!(
            matches!(&amqp.source, BridgeSource::AmqpQueue(q) if q.queue == "sms.requests" && q.durable && q.declare)
        );
        assert!(
            matches!(&c.bridges[1].source, BridgeSource::RedisList { processing, .. } if processing == "backstop:processing:sms-list")
        );
        assert!(
            matches!(&c.bridges[2].source, BridgeSource::RedisStream { group, consumer, .. } if group == "backstop" && consumer == "sms-stream")
        );
    }

    #[test]
    fn reads_kafka_and_nats_bridges_with_their_defaults() {
        let c = Config::parse(
            &format!(
                r#"{KINDS}
            [bridges.orders-in]
            broker = "kafka://127.0.0.1:9092"
            topic = "orders"
            kind = "sms.send"
            [bridges.orders-js]
            broker = "nats://127.0.0.1:4222"
            stream = "ORDERS"
            consumer = "backstop"
            subject = "orders.>"
            kind = "sms.send"
            key = "/order_id"
            max_deliver = 5
            [bridges.plain-js]
            broker = "nats://127.0.0.1:4222"
            stream = "ORDERS"
            kind = "sms.send"
            "#
            ),
            "t.toml",
        )
        .unwrap();
        let by = |n: &str| c.bridges.iter().find(|b| b.name == n).unwrap();
        let kafka = by("orders-in");
        assert_eq!(
            kafka.source,
            BridgeSource::KafkaTopic {
                topic: "orders".into(),
                group: "orders-in".into()
            }
        );
        assert_eq!(kafka.key, KeySource::MessageKey);
        let BridgeSource::NatsStream(js) = &by("orders-js").source else {
            panic!("{:?}", by("orders-js"))
        };
        assert_eq!(
            (
                js.stream.as_str(),
                js.consumer.as_str(),
                js.subject.as_deref()
            ),
            ("ORDERS", "backstop", Some("orders.>"))
        );
        assert_eq!((js.max_deliver, js.max_ack_pending), (5, 1000));
        assert_eq!(js.ack_wait, std::time::Duration::from_secs(30));
        let BridgeSource::NatsStream(plain) = &by("plain-js").source else {
            panic!()
        };
        assert_eq!(
            (plain.consumer.as_str(), plain.max_deliver),
            ("plain-js", -1)
        );
        assert_eq!(by("plain-js").key, KeySource::MessageId);
    }

    #[test]
    fn a_bad_kafka_or_nats_bridge_fails_at_load_naming_the_key() {
        let with = |body: &str| format!("{KINDS}[bridges.b]\nkind = \"sms.send\"\n{body}");
        let cases = [
            (
                with("broker = \"kafka://h:9092\""),
                "bridges.\"b\".topic: missing",
            ),
            (
                with("broker = \"kafka://h:9092\"\ntopic = \"t\"\nqueue = \"q\""),
                "bridges.\"b\".queue: only an AMQP or Redis bridge has queue",
            ),
            (
                with("broker = \"amqp://h\"\nqueue = \"q\"\ntopic = \"t\""),
                "bridges.\"b\".topic: only a Kafka bridge has topic",
            ),
            (
                with("broker = \"nats://h:4222\"\nsubject = \"s\""),
                "bridges.\"b\".stream: missing",
            ),
            (
                with("broker = \"nats://h:4222\"\nstream = \"S\"\nmax_deliver = 0"),
                "bridges.\"b\".max_deliver: must be at least 1",
            ),
            (
                with("broker = \"nats://h:4222\"\nstream = \"S\"\nmax_ack_pending = 10"),
                "bridges.\"b\".max_ack_pending: 10 is below prefetch (64)",
            ),
            (
                with("broker = \"nats://h:4222\"\nstream = \"S\"\nack_wait = \"10ms\""),
                "bridges.\"b\".ack_wait: must be at least 1s",
            ),
            (
                with("broker = \"nats://h:4222\"\nstream = \"S\"\nkey = \"message_key\""),
                "bridges.\"b\".key: message_key is a Kafka message's key",
            ),
            (
                with("broker = \"redis://h\"\nqueue = \"l\"\nkey = \"/id\"\nack_wait = \"5s\""),
                "bridges.\"b\".ack_wait: only a NATS bridge has ack_wait",
            ),
        ];
        let cases: Vec<(&str, &str)> = cases.iter().map(|(a, b)| (a.as_str(), *b)).collect();
        assert_refused(&cases);
    }

    #[test]
    fn a_bad_bridge_fails_at_load_naming_the_key() {
        let with = |body: &str| format!("{KINDS}[bridges.b]\n{body}");
        let cases = [
            (
                with("queue = \"q\"\nkind = \"sms.send\""),
                "bridges.\"b\".broker: missing",
            ),
            (
                with("broker = \"localhost:5672\"\nqueue = \"q\"\nkind = \"sms.send\""),
                "bridges.\"b\".broker: \"localhost:5672\" has no scheme",
            ),
            (
                with("broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.sent\""),
                "bridges.\"b\".kind: \"sms.sent\" is not a configured kind (configured: sms.send)",
            ),
            (
                with("broker = \"amqp://h\"\nkind = \"sms.send\""),
                "bridges.\"b\".queue: missing",
            ),
            (
                with(
                    "broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.send\"\nkey = \"order_id\"",
                ),
                "bridges.\"b\".key: \"order_id\" is not a key source",
            ),
            (
                with("broker = \"redis://h\"\nqueue = \"q\"\nkind = \"sms.send\""),
                "bridges.\"b\".key: missing",
            ),
            (
                with("broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.send\"\nstream = \"s\""),
                "bridges.\"b\".stream: only a Redis or NATS bridge has stream",
            ),
            (
                with("broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.send\"\nprefetch = 0"),
                "bridges.\"b\".prefetch: must be at least 1",
            ),
            (
                with(
                    "broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.send\"\nqueue_type = \"fast\"",
                ),
                "bridges.\"b\".queue_type",
            ),
            (
                with("broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.send\"\nprefech = 3"),
                "unknown field `prefech`",
            ),
        ];
        let cases: Vec<(&str, &str)> = cases.iter().map(|(a, b)| (a.as_str(), *b)).collect();
        assert_refused(&cases);
    }
}
