//! What a `[bridges.NAME]` consumes, one function per broker: each takes the keys its broker
//! has, refuses the keys of other brokers by name, and fills in the defaults. An error is
//! `(key, what is wrong)`.

use super::bridges::RawBridge;
use backstop_brokers::BrokerKind;
use backstop_core::broker::{AmqpQueue, BridgeSource, NatsConsumer};
use backstop_core::duration::parse_duration;
use std::time::Duration;

type Problem = (String, String);
type At<'a> = &'a dyn Fn(&str) -> String;

/// Which brokers each broker-specific key belongs to.
const KEYS: &[(&str, &[BrokerKind])] = &[
    ("queue", &[BrokerKind::Amqp, BrokerKind::Redis]),
    ("stream", &[BrokerKind::Redis, BrokerKind::Nats]),
    ("group", &[BrokerKind::Redis, BrokerKind::Kafka]),
    ("consumer", &[BrokerKind::Redis, BrokerKind::Nats]),
    ("processing", &[BrokerKind::Redis]),
    ("claim_idle", &[BrokerKind::Redis]),
    ("queue_type", &[BrokerKind::Amqp]),
    ("durable", &[BrokerKind::Amqp]),
    ("dead_letter_exchange", &[BrokerKind::Amqp]),
    ("declare", &[BrokerKind::Amqp]),
    ("topic", &[BrokerKind::Kafka]),
    ("subject", &[BrokerKind::Nats]),
    ("ack_wait", &[BrokerKind::Nats]),
    ("max_deliver", &[BrokerKind::Nats]),
    ("max_ack_pending", &[BrokerKind::Nats]),
];

fn given(b: &RawBridge, key: &str) -> bool {
    match key {
        "queue" => b.queue.is_some(),
        "stream" => b.stream.is_some(),
        "group" => b.group.is_some(),
        "consumer" => b.consumer.is_some(),
        "processing" => b.processing.is_some(),
        "claim_idle" => b.claim_idle.is_some(),
        "queue_type" => b.queue_type.is_some(),
        "durable" => b.durable.is_some(),
        "dead_letter_exchange" => b.dead_letter_exchange.is_some(),
        "declare" => b.declare.is_some(),
        "topic" => b.topic.is_some(),
        "subject" => b.subject.is_some(),
        "ack_wait" => b.ack_wait.is_some(),
        "max_deliver" => b.max_deliver.is_some(),
        "max_ack_pending" => b.max_ack_pending.is_some(),
        _ => false,
    }
}

fn name(k: BrokerKind) -> &'static str {
    match k {
        BrokerKind::Amqp => "an AMQP",
        BrokerKind::Redis => "a Redis",
        BrokerKind::Kafka => "a Kafka",
        BrokerKind::Nats => "a NATS",
    }
}

/// Refuses a key another broker's bridge has: `only a Redis or NATS bridge has stream`.
pub(super) fn only_its_keys(b: &RawBridge, kind: BrokerKind, at: At<'_>) -> Result<(), Problem> {
    for (key, brokers) in KEYS {
        if given(b, key) && !brokers.contains(&kind) {
            let mut owners = brokers.iter().map(|k| name(*k));
            let first = owners.next().unwrap_or_default();
            let rest: Vec<&str> = owners
                .map(|n| n.split_once(' ').map_or(n, |(_, n)| n))
                .collect();
            let owners = match rest.is_empty() {
                true => first.to_string(),
                false => format!("{first} or {}", rest.join(" or ")),
            };
            return Err((at(key), format!("only {owners} bridge has {key}")));
        }
    }
    Ok(())
}

/// Refuses each of `fields` that is given: only `what` has it.
fn only_for(at: At<'_>, fields: &[(&str, bool)], what: &str) -> Result<(), Problem> {
    match fields.iter().find(|(_, given)| *given) {
        Some((field, _)) => Err((at(field), format!("only {what} has {field}"))),
        None => Ok(()),
    }
}

fn nonempty(v: Option<&String>, at: String, missing: &str) -> Result<String, Problem> {
    match v {
        Some(s) if !s.is_empty() => Ok(s.clone()),
        _ => Err((at, missing.to_string())),
    }
}

/// An AMQP queue, declared (or checked) as configured.
pub(super) fn amqp(b: &RawBridge, at: At<'_>) -> Result<BridgeSource, Problem> {
    let queue = nonempty(
        b.queue.as_ref(),
        at("queue"),
        "missing: the queue to consume",
    )?;
    if let Some(t) = &b.queue_type
        && !["classic", "quorum"].contains(&t.as_str())
    {
        return Err((
            at("queue_type"),
            format!("{t:?} is not a queue type: use \"classic\" or \"quorum\""),
        ));
    }
    Ok(BridgeSource::AmqpQueue(AmqpQueue {
        queue,
        queue_type: b.queue_type.clone(),
        durable: b.durable.unwrap_or(true),
        dead_letter_exchange: b.dead_letter_exchange.clone(),
        declare: b.declare.unwrap_or(true),
    }))
}

/// A Redis list (`queue`) with its processing list, or a Redis `stream` with its group.
pub(super) fn redis(b: &RawBridge, name: &str, at: At<'_>) -> Result<BridgeSource, Problem> {
    match (&b.queue, &b.stream) {
        (Some(list), None) => {
            only_for(
                at,
                &[
                    ("group", b.group.is_some()),
                    ("consumer", b.consumer.is_some()),
                    ("claim_idle", b.claim_idle.is_some()),
                ],
                "a stream bridge",
            )?;
            Ok(BridgeSource::RedisList {
                list: nonempty(Some(list), at("queue"), "must not be empty")?,
                processing: b
                    .processing
                    .clone()
                    .unwrap_or_else(|| format!("backstop:processing:{name}")),
            })
        }
        (None, Some(stream)) => {
            only_for(
                at,
                &[("processing", b.processing.is_some())],
                "a list bridge",
            )?;
            let claim_idle = match &b.claim_idle {
                Some(v) => parse_duration(v).map_err(|e| (at("claim_idle"), e.to_string()))?,
                None => Duration::from_secs(60),
            };
            Ok(BridgeSource::RedisStream {
                stream: nonempty(Some(stream), at("stream"), "must not be empty")?,
                group: b.group.clone().unwrap_or_else(|| "backstop".into()),
                consumer: b.consumer.clone().unwrap_or_else(|| name.to_string()),
                claim_idle,
            })
        }
        (Some(_), Some(_)) => Err((
            at("stream"),
            "give queue (a Redis list) or stream, not both".into(),
        )),
        (None, None) => Err((
            at("queue"),
            "missing: the Redis list (queue) or stream to consume".into(),
        )),
    }
}

/// A Kafka `topic`, read by the consumer `group` (the bridge's name unless given).
pub(super) fn kafka(b: &RawBridge, name: &str, at: At<'_>) -> Result<BridgeSource, Problem> {
    Ok(BridgeSource::KafkaTopic {
        topic: nonempty(
            b.topic.as_ref(),
            at("topic"),
            "missing: the topic to consume",
        )?,
        group: match &b.group {
            Some(g) => nonempty(Some(g), at("group"), "must not be empty")?,
            None => name.to_string(),
        },
    })
}

/// JetStream's default `AckWait`.
const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);
/// JetStream's default `MaxAckPending`.
const DEFAULT_MAX_ACK_PENDING: i64 = 1000;

/// A JetStream `stream`, read by the durable pull `consumer` (the bridge's name unless given),
/// created with `subject`, `ack_wait`, `max_deliver` and `max_ack_pending` when it does not
/// exist.
pub(super) fn nats(
    b: &RawBridge,
    name: &str,
    prefetch: u16,
    at: At<'_>,
) -> Result<BridgeSource, Problem> {
    let ack_wait = match &b.ack_wait {
        Some(v) => parse_duration(v).map_err(|e| (at("ack_wait"), e.to_string()))?,
        None => DEFAULT_ACK_WAIT,
    };
    if ack_wait < Duration::from_secs(1) {
        return Err((at("ack_wait"), "must be at least 1s".into()));
    }
    let max_deliver = b.max_deliver.unwrap_or(-1);
    if max_deliver == 0 || max_deliver < -1 {
        return Err((
            at("max_deliver"),
            "must be at least 1, or -1 for no limit".into(),
        ));
    }
    let max_ack_pending = b.max_ack_pending.unwrap_or(DEFAULT_MAX_ACK_PENDING);
    if max_ack_pending != -1 && max_ack_pending < i64::from(prefetch) {
        return Err((
            at("max_ack_pending"),
            format!(
                "{max_ack_pending} is below prefetch ({prefetch}): JetStream would stop delivering before a batch is full"
            ),
        ));
    }
    Ok(BridgeSource::NatsStream(NatsConsumer {
        stream: nonempty(
            b.stream.as_ref(),
            at("stream"),
            "missing: the JetStream stream to consume",
        )?,
        consumer: match &b.consumer {
            Some(c) => nonempty(Some(c), at("consumer"), "must not be empty")?,
            None => name.to_string(),
        },
        subject: b.subject.clone(),
        ack_wait,
        max_deliver,
        max_ack_pending,
    }))
}
