//! Publishers: success only on the broker's confirmation.

use crate::{BoxFuture, Outgoing};
use backstop_core::broker::{BrokerTarget, Destination};

/// What became of one publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Published {
    /// The broker confirmed it: routed and persisted (AMQP confirm without a return; the
    /// reply of `LPUSH`/`XADD`; a JetStream PubAck, `duplicate` included).
    Confirmed,
    /// Confirmed, with a fact the attempt records: a JetStream retry the stream took as a
    /// duplicate of an earlier attempt, or stored as new after its duplicate window.
    ConfirmedWithNote(String),
    /// Not confirmed, and trying again may help (a nack, an unroutable return, no confirm in
    /// time, a lost connection): the broker's text.
    Transient(String),
    /// Not confirmed, and trying again will not help (a missing exchange, a wrong type at
    /// the key): the broker's text.
    Permanent(String),
}

impl Published {
    /// Whether the broker confirmed the publish.
    pub fn is_confirmed(&self) -> bool {
        matches!(self, Published::Confirmed | Published::ConfirmedWithNote(_))
    }
}

/// A publisher to one destination, shared by every attempt of its kind: publishes from
/// concurrent attempts are pipelined on one connection, each answered by its own confirm.
pub trait Publisher: Send + Sync {
    /// Publishes one task, waiting at most `timeout` for the broker's answer. Connects (or
    /// reconnects) first when needed.
    fn publish<'a>(
        &'a self,
        m: Outgoing<'a>,
        timeout: std::time::Duration,
    ) -> BoxFuture<'a, Published>;
}

/// The publisher of a broker target. It connects on its first publish.
pub fn publisher(target: &BrokerTarget) -> Box<dyn Publisher> {
    match &target.destination {
        Destination::Exchange {
            exchange,
            routing_key,
        } => Box::new(crate::amqp::publisher::AmqpPublisher::new(
            target.broker.clone(),
            exchange.clone(),
            routing_key.clone(),
        )),
        Destination::RedisList { list } => Box::new(crate::redis::publisher::RedisPublisher::list(
            target.broker.clone(),
            list.clone(),
        )),
        Destination::RedisStream { stream } => Box::new(
            crate::redis::publisher::RedisPublisher::stream(target.broker.clone(), stream.clone()),
        ),
        Destination::NatsSubject { subject } => Box::new(
            crate::nats::publisher::NatsPublisher::new(target.broker.clone(), subject.clone()),
        ),
        Destination::KafkaTopic { topic } => Box::new(crate::kafka::producer::KafkaPublisher::new(
            target.broker.clone(),
            topic.clone(),
        )),
    }
}
