//! A RabbitMQ queue consumed with manual acks.

use crate::{AckToken, BoxFuture, BrokerError, Consumer, Received};
use backstop_core::broker::{AmqpQueue, BrokerUrl};

/// A connected queue consumer.
pub(crate) struct AmqpConsumer {}

/// Connects, declares (or checks) the queue and starts consuming.
pub(crate) async fn connect(
    _url: &BrokerUrl,
    _queue: &AmqpQueue,
    _prefetch: u16,
) -> Result<AmqpConsumer, BrokerError> {
    Err(BrokerError::Config("AMQP bridges are not built yet".into()))
}

impl Consumer for AmqpConsumer {
    fn next_batch(&mut self, _max: usize) -> BoxFuture<'_, Result<Vec<Received>, BrokerError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn ack(&mut self, _tokens: Vec<AckToken>) -> BoxFuture<'_, Result<(), BrokerError>> {
        Box::pin(async { Ok(()) })
    }
}
