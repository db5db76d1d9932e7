//! Publishing to RabbitMQ in confirm mode: persistent, `mandatory`, the task id as the
//! message id. Publishes of concurrent attempts share one channel, so they are pipelined and
//! each is answered by its own confirm (lapin correlates confirms, `multiple` ones included,
//! by delivery tag).

use super::failure::broker_refusal;
use crate::{BoxFuture, Outgoing, Published, Publisher};
use backstop_core::broker::BrokerUrl;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::protocol::AMQPSoftError;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};
use std::time::Duration;
use tokio::sync::Mutex;

/// A confirmed publisher to one exchange and routing key.
pub(crate) struct AmqpPublisher {
    url: BrokerUrl,
    exchange: String,
    routing_key: String,
    /// The open channel in confirm mode, made on the first publish and again after a loss.
    open: Mutex<Option<(Connection, Channel)>>,
}

impl AmqpPublisher {
    pub(crate) fn new(url: BrokerUrl, exchange: String, routing_key: String) -> Self {
        AmqpPublisher {
            url,
            exchange,
            routing_key,
            open: Mutex::new(None),
        }
    }

    /// The channel to publish on, connecting when there is none or it was closed.
    async fn channel(&self) -> Result<Channel, String> {
        let mut open = self.open.lock().await;
        if let Some((c, ch)) = &*open
            && c.status().connected()
            && ch.status().connected()
        {
            return Ok(ch.clone());
        }
        *open = None;
        let c = Connection::connect(
            self.url.expose(),
            ConnectionProperties::default()
                .with_connection_name(LongString::from("backstop publisher")),
        )
        .await
        .map_err(|e| format!("connecting to {}: {e}", self.url))?;
        let ch = c
            .create_channel()
            .await
            .map_err(|e| format!("opening a channel on {}: {e}", self.url))?;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| format!("enabling publisher confirms on {}: {e}", self.url))?;
        *open = Some((c, ch.clone()));
        Ok(ch)
    }

    /// Forgets a channel the broker closed, so the next publish opens another.
    async fn forget(&self, ch: &Channel) {
        let mut open = self.open.lock().await;
        if open.as_ref().is_some_and(|(_, c)| c.id() == ch.id()) {
            *open = None;
        }
    }
}

fn properties(m: &Outgoing<'_>) -> BasicProperties {
    let mut headers = FieldTable::default();
    let mut put = |k: &str, v: &str| {
        headers.insert(
            ShortString::from(k),
            AMQPValue::LongString(LongString::from(v)),
        );
    };
    put("backstop-task-id", m.id);
    put("backstop-kind", m.kind);
    put("backstop-key", m.key);
    if let Some(tp) = m.traceparent {
        put("traceparent", tp);
    }
    headers.insert(
        ShortString::from("backstop-attempt"),
        AMQPValue::LongUInt(m.attempt),
    );
    BasicProperties::default()
        .with_message_id(ShortString::from(m.id))
        .with_delivery_mode(2)
        .with_content_type(ShortString::from("application/json"))
        .with_headers(headers)
}

impl Publisher for AmqpPublisher {
    fn publish<'a>(&'a self, m: Outgoing<'a>, timeout: Duration) -> BoxFuture<'a, Published> {
        Box::pin(async move {
            let attempt = async {
                let ch = self.channel().await.map_err(Published::Transient)?;
                let sent = ch
                    .basic_publish(
                        ShortString::from(self.exchange.as_str()),
                        ShortString::from(self.routing_key.as_str()),
                        BasicPublishOptions {
                            mandatory: true,
                            immediate: false,
                        },
                        m.body,
                        properties(&m),
                    )
                    .await;
                let confirmed = match sent {
                    Ok(confirm) => confirm.await,
                    Err(e) => Err(e),
                };
                match confirmed {
                    Ok(c) => Ok(self.confirmation(c)),
                    Err(e) => {
                        self.forget(&ch).await;
                        Err(self.refusal(e))
                    }
                }
            };
            match tokio::time::timeout(timeout, attempt).await {
                Ok(Ok(p)) | Ok(Err(p)) => p,
                Err(_) => Published::Transient(format!(
                    "no confirm from {} within {} ms",
                    self.url,
                    timeout.as_millis()
                )),
            }
        })
    }
}

impl AmqpPublisher {
    /// The broker's answer: an ack without a returned message is the only success. RabbitMQ
    /// acks an unroutable `mandatory` message after returning it, so the return is checked.
    fn confirmation(&self, c: Confirmation) -> Published {
        match c {
            Confirmation::Ack(None) => Published::Confirmed,
            Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
                Published::Transient(format!(
                    "returned unroutable by the broker: {} {} (exchange {:?}, routing key {:?})",
                    returned.reply_code, returned.reply_text, self.exchange, self.routing_key
                ))
            }
            Confirmation::Nack(None) => {
                Published::Transient("the broker nacked the message (not stored)".into())
            }
            Confirmation::NotRequested => {
                Published::Transient("the channel was not in confirm mode".into())
            }
        }
    }

    /// A publish the broker refused: a missing exchange will stay missing (permanent); a lost
    /// connection or any other refusal may pass on another try.
    fn refusal(&self, e: lapin::Error) -> Published {
        match broker_refusal(&e) {
            Some((AMQPSoftError::NOTFOUND | AMQPSoftError::ACCESSREFUSED, text)) => {
                Published::Permanent(format!("the broker refused the publish: {text}"))
            }
            _ => Published::Transient(format!("publishing to {}: {e}", self.url)),
        }
    }
}
