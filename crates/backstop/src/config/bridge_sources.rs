//! What a `[bridges.NAME]` consumes, one function per broker: each takes the keys its broker
//! has, refuses the keys of other brokers by name, and fills in the defaults. An error is
//! `(key, what is wrong)`.

use super::bridges::RawBridge;
use backstop_core::broker::{AmqpQueue, BridgeSource};
use backstop_core::duration::parse_duration;
use std::time::Duration;

type Problem = (String, String);
type At<'a> = &'a dyn Fn(&str) -> String;

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

/// The keys only a Redis bridge has.
fn redis_keys(b: &RawBridge) -> [(&'static str, bool); 5] {
    [
        ("stream", b.stream.is_some()),
        ("group", b.group.is_some()),
        ("consumer", b.consumer.is_some()),
        ("processing", b.processing.is_some()),
        ("claim_idle", b.claim_idle.is_some()),
    ]
}

/// The keys only an AMQP bridge has.
fn amqp_keys(b: &RawBridge) -> [(&'static str, bool); 4] {
    [
        ("queue_type", b.queue_type.is_some()),
        ("durable", b.durable.is_some()),
        ("dead_letter_exchange", b.dead_letter_exchange.is_some()),
        ("declare", b.declare.is_some()),
    ]
}

/// An AMQP queue, declared (or checked) as configured.
pub(super) fn amqp(b: &RawBridge, at: At<'_>) -> Result<BridgeSource, Problem> {
    only_for(at, &redis_keys(b), "a Redis bridge")?;
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
    only_for(at, &amqp_keys(b), "an AMQP bridge")?;
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
