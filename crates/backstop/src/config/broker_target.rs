//! A kind's broker target: `target = "rabbitmq"` with `broker`, `exchange` and `routing_key`,
//! `target = "redis"` with `broker` and `list` or `stream`, `target = "kafka"` with `broker`
//! and `topic`, or `target = "nats"` with `broker` and `subject`. Checked when the file is read:
//! a URL without a scheme or a missing exchange fails here, not at the first publish.

use backstop_brokers::{BrokerKind, check_url};
use backstop_core::Target;
use backstop_core::broker::{BrokerTarget, BrokerUrl, Destination};

/// The broker keys of `[kinds.NAME]`.
pub(super) struct BrokerFields {
    pub(super) broker: Option<String>,
    pub(super) exchange: Option<String>,
    pub(super) routing_key: Option<String>,
    pub(super) list: Option<String>,
    pub(super) stream: Option<String>,
    pub(super) topic: Option<String>,
    pub(super) subject: Option<String>,
}

impl BrokerFields {
    /// The first broker key given, if any.
    pub(super) fn given(&self) -> Option<&'static str> {
        [
            ("broker", self.broker.is_some()),
            ("exchange", self.exchange.is_some()),
            ("routing_key", self.routing_key.is_some()),
            ("list", self.list.is_some()),
            ("stream", self.stream.is_some()),
            ("topic", self.topic.is_some()),
            ("subject", self.subject.is_some()),
        ]
        .into_iter()
        .find_map(|(f, g)| g.then_some(f))
    }
}

/// The target of a `rabbitmq` or `redis` kind; an error is `(key, what is wrong)`.
pub(super) fn broker_target(
    target: &str,
    b: &BrokerFields,
    at: &dyn Fn(&str) -> String,
) -> Result<Target, (String, String)> {
    let url = b.broker.as_deref().ok_or_else(|| {
        (
            at("broker"),
            format!("missing: a {target} kind needs the broker's URL"),
        )
    })?;
    let kind = check_url(url).map_err(|m| (at("broker"), m))?;
    let refuse = |field: &str, why: &str| Err((at(field), why.to_string()));
    // Each target takes its own destination keys; any other is named.
    let own: &[&str] = match target {
        "rabbitmq" => &["exchange", "routing_key"],
        "redis" => &["list", "stream"],
        "kafka" => &["topic"],
        _ => &["subject"],
    };
    for (field, given) in [
        ("exchange", b.exchange.is_some()),
        ("routing_key", b.routing_key.is_some()),
        ("list", b.list.is_some()),
        ("stream", b.stream.is_some()),
        ("topic", b.topic.is_some()),
        ("subject", b.subject.is_some()),
    ] {
        if given && !own.contains(&field) {
            return refuse(
                field,
                &format!(
                    "a {target} kind publishes to its {}: give {}",
                    own.join(" and "),
                    own.join(" and ")
                ),
            );
        }
    }
    let destination = match (target, kind) {
        ("rabbitmq", BrokerKind::Amqp) => {
            let exchange = b.exchange.clone().ok_or_else(|| {
                (
                    at("exchange"),
                    "missing: the exchange to publish to (\"\" for the default exchange, where routing_key names the queue)".to_string(),
                )
            })?;
            let routing_key = b.routing_key.clone().unwrap_or_default();
            if exchange.is_empty() && routing_key.is_empty() {
                return refuse(
                    "routing_key",
                    "missing: with the default exchange (\"\") the routing key names the queue",
                );
            }
            Destination::Exchange {
                exchange,
                routing_key,
            }
        }
        ("redis", BrokerKind::Redis) => match (&b.list, &b.stream) {
            (Some(l), None) if !l.is_empty() => Destination::RedisList { list: l.clone() },
            (None, Some(s)) if !s.is_empty() => Destination::RedisStream { stream: s.clone() },
            (Some(_), Some(_)) => return refuse("stream", "give list or stream, not both"),
            _ => return refuse("list", "missing: the list (or stream) to publish to"),
        },
        ("kafka", BrokerKind::Kafka) => match &b.topic {
            Some(t) if !t.is_empty() => Destination::KafkaTopic { topic: t.clone() },
            _ => return refuse("topic", "missing: the topic to produce to"),
        },
        ("nats", BrokerKind::Nats) => match &b.subject {
            Some(s) if !s.is_empty() && !s.contains(['*', '>', ' ']) => {
                Destination::NatsSubject { subject: s.clone() }
            }
            Some(s) if !s.is_empty() => {
                return refuse(
                    "subject",
                    &format!("{s:?} is a wildcard: a publish needs one subject"),
                );
            }
            _ => return refuse("subject", "missing: the JetStream subject to publish to"),
        },
        (t, k) => {
            let scheme = match k {
                BrokerKind::Amqp => "an amqp://",
                BrokerKind::Redis => "a redis://",
                BrokerKind::Kafka => "a kafka://",
                BrokerKind::Nats => "a nats://",
            };
            return refuse(
                "broker",
                &format!("target = {t:?} cannot publish to {scheme} broker"),
            );
        }
    };
    Ok(Target::Broker(BrokerTarget {
        broker: BrokerUrl::new(url),
        destination,
    }))
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::config::tests::assert_refused;
    use backstop_core::Target;
    use backstop_core::broker::Destination;

    #[test]
    fn reads_rabbitmq_and_redis_targets() {
        let c = Config::parse(
            r#"
            [kinds."order.created"]
            target = "rabbitmq"
            broker = "amqp://guest:guest@127.0.0.1:5672/%2f"
            exchange = "orders"
            routing_key = "order.created"
            [kinds."sms.out"]
            target = "redis"
            broker = "redis://127.0.0.1:6379/0"
            stream = "sms"
            "#,
            "t.toml",
        )
        .unwrap();
        let Target::Broker(b) = &c.kinds[0].target else {
            panic!()
        };
        assert_eq!(
            b.destination,
            Destination::Exchange {
                exchange: "orders".into(),
                routing_key: "order.created".into()
            }
        );
        assert!(!format!("{:?}", c.kinds[0]).contains("guest:guest"));
        // Publishes are pipelined: a broker kind keeps 512 in flight unless told otherwise.
        assert_eq!(
            c.kinds[0].concurrency,
            backstop_core::kind::DEFAULT_BROKER_CONCURRENCY
        );
        let eight = Config::parse(
            "[kinds.a]\ntarget = \"redis\"\nbroker = \"redis://h\"\nlist = \"l\"\nconcurrency = 8",
            "t.toml",
        )
        .unwrap();
        assert_eq!(eight.kinds[0].concurrency, 8);
        let Target::Broker(b) = &c.kinds[1].target else {
            panic!()
        };
        assert_eq!(
            b.destination,
            Destination::RedisStream {
                stream: "sms".into()
            }
        );
    }

    #[test]
    fn reads_kafka_and_nats_targets() {
        let c = Config::parse(
            r#"
            [kinds."order.created.out"]
            target = "kafka"
            broker = "kafka://127.0.0.1:9092"
            topic = "orders"
            [kinds."order.created.js"]
            target = "nats"
            broker = "nats://127.0.0.1:4222"
            subject = "orders.created"
            "#,
            "t.toml",
        )
        .unwrap();
        let destination =
            |name: &str| match &c.kinds.iter().find(|k| k.name == name).unwrap().target {
                Target::Broker(b) => b.destination.clone(),
                other => panic!("{other:?}"),
            };
        assert_eq!(
            destination("order.created.out"),
            Destination::KafkaTopic {
                topic: "orders".into()
            }
        );
        assert_eq!(
            destination("order.created.js"),
            Destination::NatsSubject {
                subject: "orders.created".into()
            }
        );
    }

    #[test]
    fn a_bad_kafka_or_nats_target_fails_at_load_naming_the_key() {
        assert_refused(&[
            (
                "[kinds.a]\ntarget = \"kafka\"\nbroker = \"kafka://h:9092\"",
                "kinds.\"a\".topic: missing",
            ),
            (
                "[kinds.a]\ntarget = \"kafka\"\nbroker = \"kafka://h:9092\"\ntopic = \"t\"\nexchange = \"x\"",
                "kinds.\"a\".exchange: a kafka kind publishes to its topic",
            ),
            (
                "[kinds.a]\ntarget = \"nats\"\nbroker = \"nats://h:4222\"\nsubject = \"orders.>\"",
                "kinds.\"a\".subject: \"orders.>\" is a wildcard",
            ),
            (
                "[kinds.a]\ntarget = \"nats\"\nbroker = \"kafka://h:9092\"\nsubject = \"s\"",
                "cannot publish to a kafka:// broker",
            ),
        ]);
    }

    #[test]
    fn a_bad_broker_target_fails_at_load_naming_the_key() {
        assert_refused(&[
            (
                "[kinds.a]\ntarget = \"rabbitmq\"\nexchange = \"x\"",
                "kinds.\"a\".broker: missing",
            ),
            (
                "[kinds.a]\ntarget = \"rabbitmq\"\nbroker = \"127.0.0.1:5672\"\nexchange = \"x\"",
                "kinds.\"a\".broker: \"127.0.0.1:5672\" has no scheme",
            ),
            (
                "[kinds.a]\ntarget = \"rabbitmq\"\nbroker = \"amqp://h\"",
                "kinds.\"a\".exchange: missing",
            ),
            (
                "[kinds.a]\ntarget = \"rabbitmq\"\nbroker = \"amqp://h\"\nexchange = \"\"",
                "kinds.\"a\".routing_key: missing",
            ),
            (
                "[kinds.a]\ntarget = \"redis\"\nbroker = \"amqp://h\"\nlist = \"l\"",
                "cannot publish to an amqp:// broker",
            ),
            (
                "[kinds.a]\ntarget = \"redis\"\nbroker = \"redis://h\"",
                "kinds.\"a\".list: missing",
            ),
            (
                "[kinds.a]\nurl = \"http://x\"\nexchange = \"e\"",
                "kinds.\"a\".exchange: only a broker target",
            ),
            (
                "[kinds.a]\ntarget = \"redis\"\nbroker = \"redis://h\"\nlist = \"l\"\nurl = \"http://x\"",
                "kinds.\"a\".url: a broker target",
            ),
        ]);
    }
}
