//! Messages JetStream gave up on: past `MaxDeliver` deliveries the server stops delivering a
//! message and publishes an advisory on
//! `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>` naming its stream
//! sequence. The consumer reads the message back by that sequence and hands it out as
//! poison, so that it enters the ledger as a failed task instead of staying in the stream
//! unseen.
//!
//! Advisories are plain NATS messages, not kept anywhere: one published while no bridge is
//! connected (or between a bridge's connections) is never seen, and its message stays in the
//! stream without a task. Two bridges sharing one durable each see every advisory; the
//! ledger's key makes the second a duplicate.

use super::message::{self, Origin};
use crate::{AckToken, Received};
use async_nats::jetstream::message::StreamMessage;
use serde_json::json;

/// The advisories of one consumer.
pub(super) fn subject(stream: &str, consumer: &str) -> String {
    format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{consumer}")
}

/// What an advisory says of the message given up on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Advisory {
    pub(super) stream_seq: u64,
    pub(super) deliveries: i64,
}

/// Reads `io.nats.jetstream.advisory.v1.max_deliver`; `None` for anything else.
pub(super) fn parse(payload: &[u8]) -> Option<Advisory> {
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    Some(Advisory {
        stream_seq: v.get("stream_seq")?.as_u64()?,
        deliveries: v.get("deliveries").and_then(|d| d.as_i64()).unwrap_or(0),
    })
}

/// The message given up on, as a poison [`Received`]; its token acks nothing.
pub(super) fn received(
    m: &StreamMessage,
    a: Advisory,
    stream: &str,
    consumer: &str,
    max_deliver: i64,
    token: AckToken,
) -> Received {
    let origin = Origin {
        stream,
        consumer,
        subject: m.subject.as_str(),
        stream_seq: m.sequence,
        delivered: a.deliveries,
        delivery: None,
    };
    let mut r = message::received(&m.payload, Some(&m.headers), origin, token);
    r.origin.insert("poison".into(), json!(true));
    r.poison = Some(format!(
        "poison: delivered {} times (MaxDeliver {max_deliver}) by consumer {consumer:?} without an ack; JetStream gave up on stream {stream:?} sequence {}",
        a.deliveries, m.sequence
    ));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_max_deliver_advisory_names_the_sequence_and_deliveries() {
        let a = br#"{"type":"io.nats.jetstream.advisory.v1.max_deliver","id":"x","timestamp":"2024-01-01T00:00:00Z","stream":"S","consumer":"C","stream_seq":42,"deliveries":3}"#;
        assert_eq!(
            parse(a),
            Some(Advisory {
                stream_seq: 42,
                deliveries: 3
            })
        );
        assert_eq!(parse(b"{}"), None);
        assert_eq!(parse(b"not json"), None);
    }
}
