//! A stream entry as a received message: fields as headers, the body from field `payload`
//! (or `body`), else all fields as a JSON object.

use super::stream_reply::Fields;
use crate::{AckToken, Received};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Where an entry came from, for the task's first event.
pub(crate) struct Origin<'a> {
    pub(crate) stream: &'a str,
    pub(crate) group: &'a str,
    pub(crate) delivery_count: u64,
    /// Taken from another consumer by `XAUTOCLAIM`.
    pub(crate) claimed: bool,
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The message of entry `id`.
pub(crate) fn received(id: String, fields: Fields, from: Origin<'_>, token: AckToken) -> Received {
    // The body keeps its exact bytes; the headers are text.
    let pick = |name: &[u8]| {
        fields
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, v)| v.clone())
    };
    let raw_body = pick(b"payload").or_else(|| pick(b"body"));
    let headers: BTreeMap<String, String> = fields
        .into_iter()
        .map(|(f, v)| (text(f), text(v)))
        .collect();
    let body = raw_body
        .unwrap_or_else(|| serde_json::to_vec(&headers).expect("a map of strings serializes"));
    let mut origin = Map::new();
    origin.insert("broker".into(), Value::from("redis"));
    origin.insert("stream".into(), Value::from(from.stream));
    origin.insert("group".into(), Value::from(from.group));
    origin.insert("entry_id".into(), Value::from(id.as_str()));
    origin.insert("delivery_count".into(), Value::from(from.delivery_count));
    origin.insert("claimed".into(), Value::from(from.claimed));
    Received {
        body,
        message_id: Some(id),
        message_key: None,
        headers,
        origin,
        death: None,
        poison: None,
        token,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin<'static> {
        Origin {
            stream: "s",
            group: "g",
            delivery_count: 1,
            claimed: false,
        }
    }

    fn field(f: &str, v: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (f.as_bytes().to_vec(), v.to_vec())
    }

    #[test]
    fn the_body_is_payload_then_body_then_all_fields() {
        let both = vec![field("body", b"b"), field("payload", b"\xff\x00p")];
        let m = received("1-0".into(), both, origin(), AckToken(0));
        assert_eq!(m.body, b"\xff\x00p");
        assert_eq!(m.headers["payload"], "\u{fffd}\u{0}p");
        assert_eq!(m.message_id.as_deref(), Some("1-0"));

        let body = vec![field("body", b"b")];
        assert_eq!(
            received("1-1".into(), body, origin(), AckToken(1)).body,
            b"b"
        );

        let neither = vec![field("order", b"7"), field("kind", b"sms")];
        let m = received("1-2".into(), neither, origin(), AckToken(2));
        let json: serde_json::Value = serde_json::from_slice(&m.body).unwrap();
        assert_eq!(json, serde_json::json!({"order": "7", "kind": "sms"}));
        assert_eq!(m.origin["entry_id"], "1-2");
    }
}
