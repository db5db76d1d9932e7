//! From a received message to what the ledger records: a task of the bridge's kind (pending,
//! or `failed` for a dead-letter intake), or the rejection of a message that cannot become
//! one, recorded as a `failed` task of `backstop.rejected.<bridge>` with the raw bytes.

use crate::enqueue::{self, EnqueueRequest};
use backstop_brokers::Received;
use backstop_core::broker::{BridgeConfig, KeySource, rejected_kind};
use backstop_core::{Intake, KindConfig, NewTask, TaskId, validate};
use base64::Engine as _;
use jiff::Timestamp;
use serde_json::{Value, json};
use std::collections::HashMap;

/// What one message becomes.
#[derive(Debug)]
pub(crate) enum Admission {
    /// A task of the bridge's kind.
    Task(NewTask),
    /// A rejection record, and why.
    Rejected { task: NewTask, reason: String },
}

/// Turns `m` into a task of the bridge's kind, or a rejection when it cannot be one.
pub(crate) fn admit(
    bridge: &BridgeConfig,
    kinds: &HashMap<String, KindConfig>,
    m: &Received,
    now: Timestamp,
    max_payload: usize,
) -> Admission {
    match task(bridge, kinds, m, now, max_payload) {
        Ok(t) => Admission::Task(t),
        Err(reason) => Admission::Rejected {
            task: rejection(bridge, m, &reason, now),
            reason,
        },
    }
}

fn task(
    bridge: &BridgeConfig,
    kinds: &HashMap<String, KindConfig>,
    m: &Received,
    now: Timestamp,
    max_payload: usize,
) -> Result<NewTask, String> {
    let limit = bridge.max_message.min(max_payload);
    if m.body.len() > limit {
        return Err(format!(
            "the message is {} bytes, over the limit of {limit}",
            m.body.len()
        ));
    }
    let key = key(&bridge.key, m)?;
    let r = EnqueueRequest {
        kind: bridge.kind.clone(),
        key,
        payload: m.body.clone(),
        traceparent: m.headers.get("traceparent").cloned(),
        ..EnqueueRequest::default()
    };
    let mut t = enqueue::prepare(kinds, r, now, max_payload).map_err(|e| e.to_string())?;
    t.origin = Some(Value::Object(m.origin.clone()).to_string());
    if let Some(reason) = &m.poison {
        t.intake = Intake::Failed {
            reason: reason.clone(),
        };
    } else if bridge.dead_letters {
        t.intake = Intake::Failed {
            reason: match &m.death {
                Some(d) => format!("dead letter: {d}"),
                None => format!("dead letter taken in by bridge {}", bridge.name),
            },
        };
    }
    Ok(t)
}

/// The message's business key, as the bridge's `key` says.
fn key(source: &KeySource, m: &Received) -> Result<String, String> {
    let key = match source {
        KeySource::Pointer(p) => {
            if serde_json::from_slice::<&serde_json::value::RawValue>(&m.body).is_err() {
                return Err(format!("the body is not JSON, so it has no key at {p}"));
            }
            backstop_webhooks::verify::json_id_at(&m.body, p)
                .ok_or_else(|| format!("the body has no string or number at {p} for the key"))?
        }
        KeySource::Header(h) | KeySource::Field(h) => m
            .headers
            .get(h)
            .cloned()
            .ok_or_else(|| format!("the message has no {source} for the key"))?,
        KeySource::MessageId => m
            .message_id
            .clone()
            .ok_or("the message has no message_id for the key")?,
        KeySource::MessageKey => {
            let k = m
                .message_key
                .as_deref()
                .ok_or("the message has no message key for the key")?;
            String::from_utf8(k.to_vec()).map_err(|_| "the message key is not UTF-8")?
        }
    };
    if key.is_empty() {
        return Err(format!("the key at {source} is empty"));
    }
    validate::key(&key).map_err(|e| format!("the key at {source}: {e}"))?;
    Ok(key)
}

/// The rejection record, keyed by the body's SHA-256 with a payload made of the bytes alone:
/// the same bytes again (a redelivery, or a producer's resend under another message id or
/// with other headers) land on the same record as a `redelivered` event, and never conflict
/// with it, so no reject goes unrecorded. The reason, the message id, the headers and the
/// broker's metadata are its origin (on `created`, and on each `redelivered`).
fn rejection(bridge: &BridgeConfig, m: &Received, reason: &str, now: Timestamp) -> NewTask {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &m.body);
    let sha256: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let key = format!("sha256:{sha256}");
    let mut payload = json!({
        "bytes": m.body.len(),
        "sha256": sha256,
        "body_base64": base64::engine::general_purpose::STANDARD.encode(&m.body),
    });
    if let Ok(text) = std::str::from_utf8(&m.body) {
        payload["body_text"] = json!(text);
    }
    let mut origin = m.origin.clone();
    origin.insert("bridge".into(), json!(bridge.name));
    origin.insert("kind".into(), json!(bridge.kind));
    origin.insert("reason".into(), json!(reason));
    origin.insert("message_id".into(), json!(m.message_id));
    origin.insert("headers".into(), json!(m.headers));
    NewTask {
        id: TaskId::new(),
        kind: rejected_kind(&bridge.name),
        key,
        payload: payload.to_string().into_bytes(),
        max_attempts: 1,
        run_at: now,
        expires_at: None,
        traceparent: None,
        intake: Intake::Failed {
            reason: format!("rejected by bridge {}: {reason}", bridge.name),
        },
        origin: Some(Value::Object(origin).to_string()),
        group: None,
    }
}

/// The rejection of a message whose key holds another payload already.
pub(crate) fn conflict(
    bridge: &BridgeConfig,
    m: &Received,
    existing: TaskId,
    now: Timestamp,
) -> (NewTask, String) {
    let reason = format!(
        "task {existing} of kind {} has this key with a different payload",
        bridge.kind
    );
    (rejection(bridge, m, &reason, now), reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use backstop_brokers::AckToken;
    use backstop_core::Target;
    use backstop_core::broker::{AmqpQueue, BridgeSource, BrokerUrl};
    use std::collections::BTreeMap;

    fn bridge(key: &str) -> BridgeConfig {
        BridgeConfig {
            name: "sms-in".into(),
            broker: BrokerUrl::new("amqp://127.0.0.1"),
            source: BridgeSource::AmqpQueue(AmqpQueue {
                queue: "q".into(),
                queue_type: None,
                durable: true,
                dead_letter_exchange: None,
                declare: true,
            }),
            kind: "sms.send".into(),
            key: KeySource::parse(key).unwrap(),
            prefetch: 8,
            dead_letters: false,
            max_message: 64,
        }
    }

    fn msg(body: &[u8]) -> Received {
        Received {
            body: body.to_vec(),
            message_id: None,
            message_key: None,
            headers: BTreeMap::from([("x-order".to_string(), "H-1".to_string())]),
            origin: serde_json::Map::from_iter([("queue".to_string(), json!("q"))]),
            death: None,
            poison: None,
            token: AckToken(1),
        }
    }

    fn kinds() -> HashMap<String, KindConfig> {
        HashMap::from([(
            "sms.send".to_string(),
            KindConfig::new("sms.send", Target::Pull),
        )])
    }

    fn reason(a: Admission) -> String {
        match a {
            Admission::Rejected { reason, task } => {
                assert_eq!(task.kind, "backstop.rejected.sms-in");
                assert!(matches!(task.intake, Intake::Failed { .. }));
                reason
            }
            Admission::Task(t) => panic!("expected a rejection, got {t:?}"),
        }
    }

    #[test]
    fn a_good_message_becomes_a_task_keyed_by_its_pointer_with_its_origin() {
        let a = admit(
            &bridge("/order_id"),
            &kinds(),
            &msg(br#"{"order_id":123456789012345678901}"#),
            Timestamp::UNIX_EPOCH,
            1024,
        );
        let Admission::Task(t) = a else {
            panic!("{a:?}")
        };
        assert_eq!(t.key, "123456789012345678901");
        assert_eq!(t.kind, "sms.send");
        assert_eq!(t.intake, Intake::Run);
        assert_eq!(t.origin.as_deref(), Some(r#"{"queue":"q"}"#));
        let a = admit(
            &bridge("header:x-order"),
            &kinds(),
            &msg(b"{}"),
            Timestamp::UNIX_EPOCH,
            1024,
        );
        assert!(matches!(a, Admission::Task(t) if t.key == "H-1"));
    }

    #[test]
    fn a_kafka_message_key_is_a_key_and_a_poison_message_enters_failed() {
        let mut m = msg(b"{}");
        m.message_key = Some(b"order-7".to_vec());
        let at = Timestamp::UNIX_EPOCH;
        let a = admit(&bridge("message_key"), &kinds(), &m, at, 1024);
        assert!(matches!(&a, Admission::Task(t) if t.key == "order-7" && t.intake == Intake::Run));
        m.poison = Some("poison: delivered 5 times (MaxDeliver 5)".into());
        let Admission::Task(t) = admit(&bridge("message_key"), &kinds(), &m, at, 1024) else {
            panic!()
        };
        assert_eq!(
            t.intake,
            Intake::Failed {
                reason: "poison: delivered 5 times (MaxDeliver 5)".into()
            }
        );
        m.message_key = Some(vec![0xff]);
        assert!(reason(admit(&bridge("message_key"), &kinds(), &m, at, 1024)).contains("UTF-8"));
        m.message_key = None;
        assert!(
            reason(admit(&bridge("message_key"), &kinds(), &m, at, 1024))
                .contains("no message key")
        );
    }

    #[test]
    fn messages_that_cannot_be_tasks_are_rejected_with_the_reason() {
        let b = bridge("/order_id");
        let k = kinds();
        let at = Timestamp::UNIX_EPOCH;
        assert!(
            reason(admit(&b, &k, &msg(b"{}"), at, 1024))
                .contains("no string or number at /order_id")
        );
        assert!(reason(admit(&b, &k, &msg(b"not json"), at, 1024)).contains("not JSON"));
        assert!(
            reason(admit(&b, &k, &msg(&[b'x'; 65]), at, 1024)).contains("over the limit of 64")
        );
        assert!(
            reason(admit(&bridge("message_id"), &k, &msg(b"{}"), at, 1024))
                .contains("no message_id")
        );
        assert!(
            reason(admit(&bridge("header:nope"), &k, &msg(b"{}"), at, 1024))
                .contains("header:nope")
        );
        // A key from a header is fine, but the ledger holds JSON payloads only.
        assert!(
            reason(admit(
                &bridge("header:x-order"),
                &k,
                &msg(b"plain"),
                at,
                1024
            ))
            .contains("JSON")
        );
        // The bridge's kind is not configured in this engine.
        assert!(
            reason(admit(
                &b,
                &HashMap::new(),
                &msg(br#"{"order_id":1}"#),
                at,
                1024
            ))
            .contains("unknown kind")
        );
    }

    #[test]
    fn a_rejection_keeps_the_raw_bytes_and_is_keyed_by_their_digest() {
        let m = msg(&[0xff, 0xfe, b'{']);
        let Admission::Rejected { task, .. } =
            admit(&bridge("/id"), &kinds(), &m, Timestamp::UNIX_EPOCH, 1024)
        else {
            panic!()
        };
        let p: Value = serde_json::from_slice(&task.payload).unwrap();
        assert_eq!(p["body_base64"], "//57");
        assert!(p.get("body_text").is_none());
        assert!(task.key.starts_with("sha256:"));
        // The same bytes under another message id and other headers: the same record, the
        // same payload (so never a conflict), the difference in the origin.
        let mut other = m.clone();
        other.message_id = Some("another-id".into());
        other.headers.insert("x-retry".into(), "2".into());
        let again = admit(
            &bridge("/id"),
            &kinds(),
            &other,
            Timestamp::UNIX_EPOCH,
            1024,
        );
        let Admission::Rejected { task: t, .. } = again else {
            panic!()
        };
        assert_eq!((&t.key, &t.payload), (&task.key, &task.payload));
        let origin: Value = serde_json::from_str(t.origin.as_deref().unwrap()).unwrap();
        assert_eq!(origin["message_id"], "another-id");
        assert!(origin["reason"].as_str().unwrap().contains("not JSON"));
    }

    #[test]
    fn a_dead_letter_intake_makes_failed_tasks_with_the_death_reason() {
        let mut b = bridge("/order_id");
        b.dead_letters = true;
        let mut m = msg(br#"{"order_id":"A-1"}"#);
        m.death = Some("rejected from queue \"sms\" (count 1)".into());
        let Admission::Task(t) = admit(&b, &kinds(), &m, Timestamp::UNIX_EPOCH, 1024) else {
            panic!()
        };
        assert_eq!(t.kind, "sms.send");
        assert_eq!(
            t.intake,
            Intake::Failed {
                reason: "dead letter: rejected from queue \"sms\" (count 1)".into()
            }
        );
    }
}
