//! A JetStream message as a [`Received`]: its payload, `Nats-Msg-Id`, headers and where it
//! came from.

use crate::{AckToken, Received};
use async_nats::HeaderMap;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The header JetStream deduplicates publishes by, read as the message id.
pub(super) const MSG_ID: &str = "Nats-Msg-Id";

/// Each header's first value (NATS headers may repeat; AMQP's and a stream entry's do not).
pub(super) fn headers(h: Option<&HeaderMap>) -> BTreeMap<String, String> {
    let Some(h) = h else {
        return BTreeMap::new();
    };
    h.iter()
        .filter_map(|(name, values)| {
            let first = values.first()?;
            Some((name.to_string(), first.as_str().to_string()))
        })
        .collect()
}

/// Where a delivery came from, for the task's first event.
pub(super) struct Origin<'a> {
    pub(super) stream: &'a str,
    pub(super) consumer: &'a str,
    pub(super) subject: &'a str,
    pub(super) stream_seq: u64,
    /// Deliveries so far, this one included.
    pub(super) delivered: i64,
    /// `None` for a message fetched by sequence (poison), which has no delivery of its own.
    pub(super) delivery: Option<Delivery>,
}

/// What only a delivery by the consumer knows.
pub(super) struct Delivery {
    pub(super) consumer_seq: u64,
    /// Messages left for the consumer after this one.
    pub(super) pending: u64,
}

/// The message as a [`Received`], its `poison` and `death` left empty.
pub(super) fn received(
    payload: &[u8],
    h: Option<&HeaderMap>,
    o: Origin<'_>,
    token: AckToken,
) -> Received {
    let headers = headers(h);
    let message_id = headers.get(MSG_ID).cloned();
    let mut origin = Map::new();
    origin.insert("broker".into(), json!("nats"));
    origin.insert("stream".into(), json!(o.stream));
    origin.insert("consumer".into(), json!(o.consumer));
    origin.insert("subject".into(), json!(o.subject));
    origin.insert("stream_seq".into(), json!(o.stream_seq));
    if let Some(d) = o.delivery {
        origin.insert("consumer_seq".into(), json!(d.consumer_seq));
        origin.insert("pending".into(), json!(d.pending));
    }
    origin.insert("delivered".into(), json!(o.delivered));
    if let Some(tp) = headers.get("traceparent") {
        origin.insert("traceparent".into(), Value::String(tp.clone()));
    }
    Received {
        body: payload.to_vec(),
        message_id,
        message_key: None,
        headers,
        origin,
        death: None,
        poison: None,
        token,
    }
}
