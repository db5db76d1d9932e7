//! RabbitMQ: a durable queue of the run's own, declared by its consumer, published to
//! through the default exchange (routing key: the queue's name).

use super::Broker;
use anyhow::Result;
use backstop_core::broker::{AmqpQueue, BridgeSource, Destination};

/// The run's queues on one RabbitMQ.
pub(super) struct Queue {
    url: String,
    run: String,
}

impl Queue {
    /// Queues named after run `run` on the RabbitMQ at `url`.
    pub(super) fn new(url: &str, run: &str) -> Self {
        Queue {
            url: url.to_string(),
            run: run.to_string(),
        }
    }
}

impl Broker for Queue {
    fn channel(&self) -> &'static str {
        "rabbitmq"
    }

    fn url(&self) -> &str {
        &self.url
    }

    async fn source(&self, what: &str) -> Result<BridgeSource> {
        Ok(BridgeSource::AmqpQueue(AmqpQueue {
            queue: format!("backstop.bench.{}.{what}", self.run),
            queue_type: None,
            durable: true,
            dead_letter_exchange: None,
            declare: true,
        }))
    }

    fn destination(&self, source: &BridgeSource) -> Destination {
        match source {
            BridgeSource::AmqpQueue(q) => Destination::Exchange {
                exchange: String::new(),
                routing_key: q.queue.clone(),
            },
            _ => unreachable!("a RabbitMQ channel makes queues only"),
        }
    }
}
