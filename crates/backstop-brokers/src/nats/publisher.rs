//! Publishing to a JetStream subject: the stream's PubAck is the confirmation.
//!
//! One connection per publisher, opened by the first publish and opened again by the first
//! publish after it was lost: concurrent publishes are pipelined on it (async-nats sends each
//! at once and matches each PubAck to its own reply inbox). The lock is held while
//! connecting (one connect, not one per waiting publish), never while a publish waits.
//!
//! Each message carries `Nats-Msg-Id: <task id>`, so a retry within the stream's duplicate
//! window is stored once (its PubAck says `duplicate`, and counts as confirmed). A retry
//! after the window is stored again: JetStream cannot tell, nor can the publisher. So a
//! retry's PubAck is noted on its attempt: a duplicate says an earlier attempt had reached
//! the stream; stored as new while the task is older than the stream's window (read once
//! per stream, only by retries) says a consumer may see it twice.

use super::connection;
use super::message::MSG_ID;
use crate::{BoxFuture, Outgoing, Published, Publisher};
use async_nats::header::{HeaderMap, HeaderName, HeaderValue};
use async_nats::jetstream::context::{Context, ContextBuilder, PublishErrorKind};
use async_nats::jetstream::publish::PublishAck;
use async_nats::{Client, connection::State};
use backstop_core::broker::BrokerUrl;
use backstop_core::duration::format_duration;
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::Mutex;

/// The bound async-nats puts on a PubAck; each publish has its caller's shorter timeout
/// around it, so this only has to be longer than any caller's.
const PUBACK_CEILING: Duration = Duration::from_secs(600);

/// The shared connection, numbered so that a failure drops only the connection it failed on,
/// not a newer one another publish has opened since.
#[derive(Default)]
struct Slot {
    generation: u64,
    open: Option<(Client, Context)>,
}

/// A publisher to one subject.
pub(crate) struct NatsPublisher {
    url: BrokerUrl,
    subject: String,
    slot: Mutex<Slot>,
    /// Each stream's duplicate window, read by the first retry that needs it.
    windows: Mutex<HashMap<String, Duration>>,
}

impl NatsPublisher {
    pub(crate) fn new(url: BrokerUrl, subject: String) -> Self {
        NatsPublisher {
            url,
            subject,
            slot: Mutex::new(Slot::default()),
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// The duplicate window of `stream`, from its config (read once, then remembered).
    async fn window(&self, js: &Context, stream: &str) -> Result<Duration, String> {
        if let Some(w) = self.windows.lock().await.get(stream) {
            return Ok(*w);
        }
        // The context's own bound is the PubAck ceiling: far too long for a lookup.
        let info = tokio::time::timeout(Duration::from_secs(5), js.get_stream(stream))
            .await
            .map_err(|_| "no answer in 5 s".to_string())?
            .map_err(|e| e.to_string())?;
        let w = info.cached_info().config.duplicate_window;
        self.windows.lock().await.insert(stream.to_string(), w);
        Ok(w)
    }

    /// What a retry's PubAck tells about earlier attempts, for its attempt's record; nothing
    /// for a first attempt, or a retry stored as new within the window (no earlier attempt
    /// reached the stream).
    async fn note(&self, js: &Context, m: &Outgoing<'_>, ack: &PublishAck) -> Option<String> {
        if m.attempt <= 1 {
            return None;
        }
        if ack.duplicate {
            return Some(format!(
                "stream {:?} already held this task id (Nats-Msg-Id) from an earlier attempt: not stored again",
                ack.stream
            ));
        }
        let age = format!("{:.1} s", m.since_enqueued.as_secs_f64());
        match self.window(js, &ack.stream).await {
            Ok(w) if m.since_enqueued < w => None,
            Ok(w) => Some(format!(
                "published {age} after the task was enqueued, past stream {:?}'s duplicate window of {}, \
                 and stored as new (sequence {}): if an earlier attempt reached the stream, it now holds \
                 this task twice (consumers deduplicate on Nats-Msg-Id)",
                ack.stream,
                format_duration(w),
                ack.sequence
            )),
            Err(e) => Some(format!(
                "stored as new (sequence {}) {age} after the task was enqueued; stream {:?}'s duplicate \
                 window could not be read ({e}), so whether an earlier attempt is stored too is unknown",
                ack.sequence, ack.stream
            )),
        }
    }

    /// The shared JetStream context and its number, connecting when there is none or the
    /// one there is no longer connected.
    async fn context(&self) -> Result<(u64, Context), Published> {
        let mut slot = self.slot.lock().await;
        if let Some((client, js)) = &slot.open
            && client.connection_state() == State::Connected
        {
            return Ok((slot.generation, js.clone()));
        }
        slot.open = None;
        let conn = connection::open(&self.url, "backstop publisher")
            .await
            .map_err(|e| match e.is_transient() {
                true => Published::Transient(e.to_string()),
                false => Published::Permanent(e.to_string()),
            })?;
        let js = ContextBuilder::new()
            .timeout(PUBACK_CEILING)
            .build(conn.client.clone());
        slot.generation += 1;
        slot.open = Some((conn.client, js.clone()));
        Ok((slot.generation, js))
    }

    /// Drops connection `generation` if it is still the shared one.
    async fn forget(&self, generation: u64) {
        let mut slot = self.slot.lock().await;
        if slot.generation == generation {
            slot.open = None;
        }
    }

    fn describe(&self) -> String {
        format!(
            "publishing to NATS subject {:?} at {}",
            self.subject,
            self.url.redacted()
        )
    }
}

/// The message's headers; a value with a line break cannot be a NATS header.
fn headers(m: &Outgoing<'_>) -> Result<HeaderMap, String> {
    let mut h = HeaderMap::new();
    let attempt = m.attempt.to_string();
    let mut put = |name: &'static str, value: &str| {
        let v: HeaderValue = value
            .parse()
            .map_err(|_| format!("header {name}: {value:?} holds a line break"))?;
        h.insert(HeaderName::from_static(name), v);
        Ok::<(), String>(())
    };
    put(MSG_ID, m.id)?;
    put("backstop-task-id", m.id)?;
    put("backstop-kind", m.kind)?;
    put("backstop-key", m.key)?;
    put("backstop-attempt", &attempt)?;
    if let Some(tp) = m.traceparent {
        put("traceparent", tp)?;
    }
    Ok(h)
}

impl Publisher for NatsPublisher {
    fn publish<'a>(&'a self, m: Outgoing<'a>, timeout: Duration) -> BoxFuture<'a, Published> {
        Box::pin(async move {
            let headers = match headers(&m) {
                Ok(h) => h,
                Err(e) => return Published::Permanent(format!("{}: {e}", self.describe())),
            };
            let mut used = None;
            let mut context = None;
            let attempt = async {
                let (generation, js) = self.context().await?;
                used = Some(generation);
                context = Some(js.clone());
                let body = m.body.to_vec().into();
                let sent = js
                    .publish_with_headers(self.subject.clone(), headers, body)
                    .await;
                let answered = match sent {
                    Ok(ack) => ack.await,
                    Err(e) => Err(e),
                };
                Ok::<_, Published>(answered)
            };
            match tokio::time::timeout(timeout, attempt).await {
                Err(_) => Published::Transient(format!(
                    "{}: no PubAck within {} ms",
                    self.describe(),
                    timeout.as_millis()
                )),
                Ok(Err(p)) => p,
                Ok(Ok(Ok(ack))) => {
                    if ack.duplicate {
                        tracing::debug!(
                            subject = %self.subject,
                            task = m.id,
                            attempt = m.attempt,
                            stream = %ack.stream,
                            seq = ack.sequence,
                            "PubAck says duplicate: the stream already holds this task id"
                        );
                    }
                    let note = match &context {
                        Some(js) => self.note(js, &m, &ack).await,
                        None => None,
                    };
                    match note {
                        Some(n) => Published::ConfirmedWithNote(n),
                        None => Published::Confirmed,
                    }
                }
                Ok(Ok(Err(e))) => {
                    let text = format!("{}: {e}", self.describe());
                    match e.kind() {
                        PublishErrorKind::StreamNotFound => Published::Permanent(format!(
                            "{}: no stream takes this subject (the server answered 503 no responders)",
                            self.describe()
                        )),
                        PublishErrorKind::MaxPayloadExceeded => Published::Permanent(text),
                        PublishErrorKind::BrokenPipe => {
                            // The connection went while the PubAck was awaited.
                            if let Some(generation) = used {
                                self.forget(generation).await;
                            }
                            Published::Transient(text)
                        }
                        _ => Published::Transient(text),
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outgoing<'a>(key: &'a str, traceparent: Option<&'a str>) -> Outgoing<'a> {
        Outgoing {
            id: "t-1",
            kind: "sms.send",
            key,
            attempt: 2,
            traceparent,
            body: b"{}",
            since_enqueued: Duration::ZERO,
        }
    }

    #[test]
    fn a_task_is_published_with_its_id_as_nats_msg_id() {
        let h = headers(&outgoing("k", Some("00-abc-def-01"))).unwrap();
        assert_eq!(h.get(MSG_ID).unwrap().as_str(), "t-1");
        assert_eq!(h.get("backstop-task-id").unwrap().as_str(), "t-1");
        assert_eq!(h.get("backstop-kind").unwrap().as_str(), "sms.send");
        assert_eq!(h.get("backstop-key").unwrap().as_str(), "k");
        assert_eq!(h.get("backstop-attempt").unwrap().as_str(), "2");
        assert_eq!(h.get("traceparent").unwrap().as_str(), "00-abc-def-01");
        assert!(
            headers(&outgoing("k", None))
                .unwrap()
                .get("traceparent")
                .is_none()
        );
        let e = headers(&outgoing("a\r\nb", None)).unwrap_err();
        assert!(e.contains("backstop-key"), "{e}");
    }
}
