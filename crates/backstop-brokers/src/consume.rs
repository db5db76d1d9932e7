//! Consumers: messages handed out, acknowledged only on the caller's word.

use crate::{AckToken, BoxFuture, BrokerError, Received};
use backstop_core::broker::{BridgeConfig, BridgeSource};

/// A connected consumer. Nothing it hands out is acknowledged until [`Consumer::ack`] names
/// it; a message never acknowledged is delivered again after a reconnect (AMQP requeues it;
/// a Redis processing list or a stream's pending entries are read again first).
pub trait Consumer: Send {
    /// Waits for at least one message, then returns it with those already waiting, up to
    /// `max`. It may return none after waiting a while with nothing (a pull that expired),
    /// so its caller gets to look at [`Consumer::ack_pending`] while the broker is silent.
    /// An error means the connection is lost: drop the consumer and connect again.
    fn next_batch(&mut self, max: usize) -> BoxFuture<'_, Result<Vec<Received>, BrokerError>>;

    /// Acknowledges messages whose tasks are committed (AMQP `basic.ack`, Redis `LREM` or
    /// `XACK`, JetStream's `+ACK`). Returns when the broker has been told, except that a
    /// broker which confirms acks (JetStream) may have this call's confirmations checked by
    /// the next call or by [`Consumer::settle_acks`]; one not confirmed is that call's error.
    fn ack(&mut self, tokens: Vec<AckToken>) -> BoxFuture<'_, Result<(), BrokerError>>;

    /// Waits until every ack sent is confirmed by the broker (for a broker that confirms
    /// them; the others are done when [`Consumer::ack`] returns).
    fn settle_acks(&mut self) -> BoxFuture<'_, Result<(), BrokerError>> {
        Box::pin(async { Ok(()) })
    }

    /// How many deliveries the broker holds unacknowledged against its own limit, for a
    /// broker that stops delivering at that limit (JetStream's `MaxAckPending`); `None` for
    /// one that has no such limit.
    fn ack_pending(&mut self) -> BoxFuture<'_, Result<Option<AckPending>, BrokerError>> {
        Box::pin(async { Ok(None) })
    }
}

/// Unacknowledged deliveries against the broker's limit of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckPending {
    /// Delivered and not yet acknowledged, by every consumer sharing the durable.
    pub pending: u64,
    /// The limit, past which the broker delivers nothing more.
    pub max: u64,
}

/// Connects a bridge's consumer: declares or checks what it consumes, then starts consuming.
/// A [`BrokerError::Config`] means the configuration cannot work against this broker.
pub fn connect_consumer(
    bridge: &BridgeConfig,
) -> BoxFuture<'_, Result<Box<dyn Consumer>, BrokerError>> {
    Box::pin(async move {
        match &bridge.source {
            BridgeSource::AmqpQueue(q) => {
                let c = crate::amqp::consumer::connect(&bridge.broker, q, bridge.prefetch).await?;
                Ok(Box::new(c) as Box<dyn Consumer>)
            }
            BridgeSource::RedisList { list, processing } => {
                let c = crate::redis::list::connect(&bridge.broker, list, processing).await?;
                Ok(Box::new(c) as Box<dyn Consumer>)
            }
            BridgeSource::RedisStream {
                stream,
                group,
                consumer,
                claim_idle,
            } => {
                let c = crate::redis::stream::connect(
                    &bridge.broker,
                    crate::redis::stream::StreamSpec {
                        stream,
                        group,
                        consumer,
                        claim_idle: *claim_idle,
                    },
                )
                .await?;
                Ok(Box::new(c) as Box<dyn Consumer>)
            }
            BridgeSource::NatsStream(c) => {
                let c = crate::nats::consumer::connect(&bridge.broker, c).await?;
                Ok(Box::new(c) as Box<dyn Consumer>)
            }
            BridgeSource::KafkaTopic { topic, group } => {
                let c = crate::kafka::consumer::connect(&bridge.broker, topic, group).await?;
                Ok(Box::new(c) as Box<dyn Consumer>)
            }
        }
    })
}

/// Deletes what a bridge consumes, with whatever it still holds (an AMQP queue; a Redis list
/// and its processing list; a Redis stream; a JetStream stream with its consumers; a Kafka
/// topic): for benches and drills that make their own. Not against Tansu 0.6 while
/// librdkafka consumers of other topics run: its answer to their fetches during a delete
/// crashes librdkafka 2.12 (see `kafka::topic`).
pub fn delete_source(bridge: &BridgeConfig) -> BoxFuture<'_, Result<(), BrokerError>> {
    Box::pin(async move {
        let url = &bridge.broker;
        match &bridge.source {
            BridgeSource::AmqpQueue(q) => {
                let failed =
                    |e| BrokerError::connection(format!("deleting queue {:?}", q.queue), e);
                let c = lapin::Connection::connect(url.expose(), Default::default())
                    .await
                    .map_err(failed)?;
                let ch = c.create_channel().await.map_err(failed)?;
                ch.queue_delete(q.queue.as_str().into(), Default::default())
                    .await
                    .map_err(failed)?;
                Ok(())
            }
            BridgeSource::RedisList { list, processing } => del(url, &[list, processing]).await,
            BridgeSource::RedisStream { stream, .. } => del(url, &[stream]).await,
            BridgeSource::NatsStream(c) => crate::nats::delete_stream(url, c).await,
            BridgeSource::KafkaTopic { topic, .. } => crate::kafka::topic::delete(url, topic).await,
        }
    })
}

async fn del(url: &backstop_core::broker::BrokerUrl, keys: &[&String]) -> Result<(), BrokerError> {
    let failed = |e| BrokerError::connection(format!("deleting {keys:?}"), e);
    let client = ::redis::Client::open(url.expose()).map_err(failed)?;
    let mut c = client
        .get_multiplexed_async_connection()
        .await
        .map_err(failed)?;
    ::redis::cmd("DEL")
        .arg(keys)
        .query_async::<()>(&mut c)
        .await
        .map_err(failed)
}
