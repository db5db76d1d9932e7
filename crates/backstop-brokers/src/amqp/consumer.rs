//! A RabbitMQ queue consumed with manual acks: at most `prefetch` deliveries unacknowledged,
//! each acknowledged only when the bridge says its task is committed. Whatever is not
//! acknowledged when the connection ends is requeued by the broker and delivered again.

use super::failure::classify;
use super::value;
use crate::{AckToken, BoxFuture, BrokerError, Consumer, Received};
use backstop_core::broker::{AmqpQueue, BrokerUrl};
use futures_util::{FutureExt, StreamExt};
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, Connection, ConnectionProperties};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// A connected queue consumer.
pub(crate) struct AmqpConsumer {
    // Held so the connection lives as long as the consumer.
    _connection: Connection,
    channel: Channel,
    deliveries: lapin::Consumer,
    queue: String,
    /// Delivery tags handed out and not yet acknowledged.
    outstanding: BTreeSet<u64>,
    /// An error met while filling a batch, reported by the next call.
    failed: Option<BrokerError>,
}

/// Connects, declares (or checks) the queue, sets the prefetch and starts consuming.
pub(crate) async fn connect(
    url: &BrokerUrl,
    q: &AmqpQueue,
    prefetch: u16,
) -> Result<AmqpConsumer, BrokerError> {
    let connection = Connection::connect(
        url.expose(),
        ConnectionProperties::default()
            .with_connection_name(LongString::from(format!("backstop bridge {}", q.queue))),
    )
    .await
    .map_err(|e| classify(format!("connecting to {url}"), e))?;
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| classify(format!("opening a channel on {url}"), e))?;
    declare(&channel, q).await?;
    channel
        .basic_qos(prefetch, BasicQosOptions::default())
        .await
        .map_err(|e| classify(format!("setting prefetch {prefetch}"), e))?;
    let tag = format!("backstop-{}-{}", std::process::id(), q.queue);
    let deliveries = channel
        .basic_consume(
            ShortString::from(q.queue.as_str()),
            ShortString::from(tag),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| classify(format!("consuming queue {:?}", q.queue), e))?;
    Ok(AmqpConsumer {
        _connection: connection,
        channel,
        deliveries,
        queue: q.queue.clone(),
        outstanding: BTreeSet::new(),
        failed: None,
    })
}

/// Declares the queue as configured, or only checks it exists (`declare = false`). A queue
/// that exists with other arguments is refused by the broker (406), and the broker's text
/// names the argument: `inequivalent arg 'x-queue-type' for queue …`.
async fn declare(channel: &Channel, q: &AmqpQueue) -> Result<(), BrokerError> {
    let mut args = FieldTable::default();
    if let Some(t) = &q.queue_type {
        args.insert(
            ShortString::from("x-queue-type"),
            AMQPValue::LongString(LongString::from(t.as_str())),
        );
    }
    if let Some(dlx) = &q.dead_letter_exchange {
        args.insert(
            ShortString::from("x-dead-letter-exchange"),
            AMQPValue::LongString(LongString::from(dlx.as_str())),
        );
    }
    let options = QueueDeclareOptions {
        passive: !q.declare,
        durable: q.durable,
        ..QueueDeclareOptions::default()
    };
    let what = match q.declare {
        true => "declaring",
        false => "checking",
    };
    channel
        .queue_declare(ShortString::from(q.queue.as_str()), options, args)
        .await
        .map_err(|e| classify(format!("{what} queue {:?}", q.queue), e))?;
    Ok(())
}

impl AmqpConsumer {
    fn received(&mut self, d: Delivery) -> Received {
        let tag = d.delivery_tag;
        self.outstanding.insert(tag);
        let p = &d.properties;
        let message_id = p.message_id().as_ref().map(|m| m.as_str().to_string());
        let mut headers = BTreeMap::new();
        let mut origin = Map::new();
        origin.insert("broker".into(), json!("amqp"));
        origin.insert("queue".into(), json!(self.queue));
        origin.insert("exchange".into(), json!(d.exchange.as_str()));
        origin.insert("routing_key".into(), json!(d.routing_key.as_str()));
        origin.insert("redelivered".into(), json!(d.redelivered));
        if let Some(id) = &message_id {
            origin.insert("message_id".into(), json!(id));
        }
        let mut death = None;
        if let Some(table) = p.headers() {
            for (k, v) in table.inner() {
                headers.insert(k.as_str().to_string(), value::text(v));
            }
            for name in ["x-death", "x-delivery-count", "x-first-death-reason"] {
                if let Some(v) = table.inner().get(name) {
                    origin.insert(name.into(), value::to_json(v));
                }
            }
            death = table.inner().get("x-death").and_then(first_death);
        }
        Received {
            body: d.data,
            message_id,
            message_key: None,
            headers,
            origin,
            death,
            poison: None,
            token: AckToken(tag),
        }
    }
}

/// The first (most recent) death of an `x-death` header, in words.
fn first_death(v: &AMQPValue) -> Option<String> {
    let Value::Array(deaths) = value::to_json(v) else {
        return None;
    };
    let d = deaths.first()?;
    let field = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    let count = d.get("count").and_then(Value::as_i64).unwrap_or(1);
    Some(format!(
        "{} from queue {:?} (count {count})",
        field("reason"),
        field("queue")
    ))
}

impl Consumer for AmqpConsumer {
    fn next_batch(&mut self, max: usize) -> BoxFuture<'_, Result<Vec<Received>, BrokerError>> {
        Box::pin(async move {
            if let Some(e) = self.failed.take() {
                return Err(e);
            }
            let first = match self.deliveries.next().await {
                Some(Ok(d)) => d,
                Some(Err(e)) => return Err(classify(format!("consuming {:?}", self.queue), e)),
                None => return Err(canceled(&self.queue)),
            };
            let mut batch = vec![self.received(first)];
            // Those already here join the batch, so one ledger commit takes many.
            while batch.len() < max {
                match self.deliveries.next().now_or_never() {
                    Some(Some(Ok(d))) => batch.push(self.received(d)),
                    Some(Some(Err(e))) => {
                        self.failed = Some(classify(format!("consuming {:?}", self.queue), e));
                        break;
                    }
                    Some(None) => {
                        self.failed = Some(canceled(&self.queue));
                        break;
                    }
                    None => break,
                }
            }
            Ok(batch)
        })
    }

    fn ack(&mut self, tokens: Vec<AckToken>) -> BoxFuture<'_, Result<(), BrokerError>> {
        Box::pin(async move {
            let tags: BTreeSet<u64> = tokens.into_iter().map(|t| t.0).collect();
            let Some(&last) = tags.last() else {
                return Ok(());
            };
            let context = || format!("acknowledging on {:?}", self.queue);
            // Every delivery up to `last` acknowledged at once when none older is still open.
            let all_up_to_last = self.outstanding.range(..=last).all(|t| tags.contains(t));
            if all_up_to_last {
                self.channel
                    .basic_ack(last, BasicAckOptions { multiple: true })
                    .await
                    .map_err(|e| classify(context(), e))?;
            } else {
                for &tag in &tags {
                    self.channel
                        .basic_ack(tag, BasicAckOptions { multiple: false })
                        .await
                        .map_err(|e| classify(context(), e))?;
                }
            }
            for tag in tags {
                self.outstanding.remove(&tag);
            }
            Ok(())
        })
    }
}

fn canceled(queue: &str) -> BrokerError {
    BrokerError::connection(
        format!("consuming {queue:?}"),
        std::io::Error::other("the broker canceled the consumer (queue deleted?)"),
    )
}
