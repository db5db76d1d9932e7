//! Publishing to RabbitMQ in confirm mode.

use crate::{BoxFuture, Outgoing, Published, Publisher};
use backstop_core::broker::BrokerUrl;
use std::time::Duration;

/// A confirmed publisher to one exchange and routing key.
pub(crate) struct AmqpPublisher {
    _url: BrokerUrl,
    _exchange: String,
    _routing_key: String,
}

impl AmqpPublisher {
    pub(crate) fn new(url: BrokerUrl, exchange: String, routing_key: String) -> Self {
        AmqpPublisher {
            _url: url,
            _exchange: exchange,
            _routing_key: routing_key,
        }
    }
}

impl Publisher for AmqpPublisher {
    fn publish<'a>(&'a self, _m: Outgoing<'a>, _timeout: Duration) -> BoxFuture<'a, Published> {
        Box::pin(async { Published::Permanent("AMQP targets are not built yet".into()) })
    }
}
