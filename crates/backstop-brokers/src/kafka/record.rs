//! A Kafka record as a [`Received`]: its payload, key and headers as they are, and where it
//! came from.

use crate::{AckToken, Received};
use rdkafka::Timestamp;
use rdkafka::message::{BorrowedMessage, Headers, Message};
use serde_json::{Map, json};
use std::collections::BTreeMap;

/// The header a backstop publisher puts the task id in, read back as `message_id`.
pub(crate) const TASK_ID: &str = "backstop-task-id";

/// The record as a message: an absent payload is an empty body; headers as UTF-8 (lossy),
/// a header without a value as an empty string, the last of a repeated name winning.
pub(crate) fn received(m: &BorrowedMessage<'_>, token: AckToken) -> Received {
    let mut headers = BTreeMap::new();
    if let Some(hs) = m.headers() {
        for h in hs.iter() {
            let value = h.value.map(String::from_utf8_lossy).unwrap_or_default();
            headers.insert(h.key.to_string(), value.into_owned());
        }
    }
    let mut origin = Map::new();
    origin.insert("broker".into(), json!("kafka"));
    origin.insert("topic".into(), json!(m.topic()));
    origin.insert("partition".into(), json!(m.partition()));
    origin.insert("offset".into(), json!(m.offset()));
    match m.timestamp() {
        Timestamp::NotAvailable => {}
        Timestamp::CreateTime(ms) => {
            origin.insert("timestamp".into(), json!(ms));
            origin.insert("timestamp_type".into(), json!("create"));
        }
        Timestamp::LogAppendTime(ms) => {
            origin.insert("timestamp".into(), json!(ms));
            origin.insert("timestamp_type".into(), json!("log_append"));
        }
    }
    if let Some(tp) = headers.get("traceparent") {
        origin.insert("traceparent".into(), json!(tp));
    }
    Received {
        body: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
        message_id: headers.get(TASK_ID).cloned(),
        message_key: m.key().map(<[u8]>::to_vec),
        headers,
        origin,
        death: None,
        poison: None,
        token,
    }
}
