//! A JetStream stream read by a durable pull consumer with explicit acks: each message is
//! acknowledged (a double ack, confirmed by the server) only when the bridge says its task
//! is committed. What is not acknowledged within the consumer's `AckWait` is delivered
//! again, to this connection or the next; past `MaxDeliver` deliveries JetStream gives up
//! and the message is handed out once more as poison (see [`super::poison`]).
//!
//! Two things overlap the bridge's ledger commit: the next pull is asked for as a batch is
//! handed out (so the server delivers it while the ledger writes this one), and a batch's
//! acks are sent at once and their confirmations awaited only before the next batch's acks
//! are sent, or by [`Consumer::settle_acks`]. An ack still unconfirmed when the connection
//! goes is not lost work: the message comes again after `AckWait` onto the same task.
//!
//! A lost connection is not ridden out: the next call returns [`BrokerError::Connection`]
//! and the bridge connects again. What was delivered on the lost connection is delivered
//! again after `AckWait`, and the ledger's key absorbs the duplicate.

use super::connection::{self, API_TIMEOUT};
use super::durable;
use super::message::{self, Delivery, Origin};
use super::poison::{self, Advisory};
use super::pull::Puller;
use crate::{AckPending, AckToken, BoxFuture, BrokerError, Consumer, Received};
use async_nats::jetstream::{self, stream::Stream};
use async_nats::{Client, Subject, Subscriber};
use backstop_core::broker::{BrokerUrl, NatsConsumer};
use futures_util::{FutureExt, StreamExt};
use std::collections::{HashMap, VecDeque};
use tokio::sync::watch;

/// What a token stands for.
enum Held {
    /// A delivery, acked on its reply subject (`$JS.ACK.…`). Only the subject is kept, not
    /// the message and its payload.
    Delivery(Subject),
    /// A message JetStream gave up on: nothing to ack.
    Poison,
}

/// A connected JetStream consumer.
pub(crate) struct JetStreamConsumer {
    // Held so the connection lives as long as the consumer.
    client: Client,
    /// For reading a delivery's ack subject.
    js: jetstream::Context,
    stream: Stream,
    stream_name: String,
    consumer_name: String,
    /// The consumer's own `MaxDeliver`, as the server has it.
    max_deliver: i64,
    puller: Puller,
    /// The consumer's `MAX_DELIVERIES` advisories.
    advisories: Subscriber,
    /// Advisories read and not yet turned into poison messages (kept across a dropped call).
    poison_due: VecDeque<Advisory>,
    lost: watch::Receiver<bool>,
    shown: String,
    outstanding: HashMap<AckToken, Held>,
    next_token: u64,
    /// The last batch's acks, sent and not yet known to be confirmed.
    confirming: Option<tokio::task::JoinHandle<Result<(), BrokerError>>>,
}

/// Connects, gets the stream (it must exist) and gets or creates the durable consumer, then
/// subscribes to its advisories and its pull inbox.
pub(crate) async fn connect(
    url: &BrokerUrl,
    c: &NatsConsumer,
) -> Result<JetStreamConsumer, BrokerError> {
    let shown = url.redacted();
    let conn = connection::open(url, &format!("backstop bridge {}", c.consumer)).await?;
    let client = conn.client;
    let mut js = jetstream::new(client.clone());
    js.set_timeout(API_TIMEOUT);
    let stream = durable::stream(&js, c, &shown).await?;
    let consumer = durable::consumer(&stream, c).await?;
    let max_deliver = consumer.cached_info().config.max_deliver;
    let advisories = client
        .subscribe(poison::subject(&c.stream, &c.consumer))
        .await
        .map_err(|e| BrokerError::connection("subscribing to MAX_DELIVERIES advisories", e))?;
    let puller = Puller::new(&client, consumer).await?;
    // Both subscriptions are on the server before the first pull or advisory.
    client
        .flush()
        .await
        .map_err(|e| BrokerError::connection(format!("subscribing at {shown}"), e))?;
    Ok(JetStreamConsumer {
        client,
        js,
        stream,
        stream_name: c.stream.clone(),
        consumer_name: c.consumer.clone(),
        max_deliver,
        puller,
        advisories,
        poison_due: VecDeque::new(),
        lost: conn.lost,
        shown,
        outstanding: HashMap::new(),
        next_token: 0,
        confirming: None,
    })
}

/// What woke a wait.
enum Woken {
    Delivery(Option<async_nats::Message>),
    Advisory(Option<async_nats::Message>),
    Expired,
    Lost,
}

impl JetStreamConsumer {
    /// Waits for the acks sent last to be confirmed; an error says how many were not.
    async fn confirmed(&mut self) -> Result<(), BrokerError> {
        let Some(handle) = self.confirming.take() else {
            return Ok(());
        };
        match handle.await {
            Ok(r) => r,
            Err(e) => Err(BrokerError::connection(
                "confirming acks on a NATS consumer",
                std::io::Error::other(e.to_string()),
            )),
        }
    }

    fn acking_what(&self) -> String {
        format!(
            "acking on NATS consumer {:?} of stream {:?}",
            self.consumer_name, self.stream_name
        )
    }

    fn lost(&self) -> BrokerError {
        BrokerError::connection(
            format!(
                "consuming NATS stream {:?} consumer {:?} at {}",
                self.stream_name, self.consumer_name, self.shown
            ),
            std::io::Error::other("the connection was lost"),
        )
    }

    fn token(&mut self, held: Held) -> AckToken {
        let token = AckToken(self.next_token);
        self.next_token += 1;
        self.outstanding.insert(token, held);
        token
    }

    /// Poison messages due first, then deliveries already in the inbox; with none, waits on
    /// the open pull request (pulling again as each expires), an advisory or a lost
    /// connection, whichever comes first.
    async fn take(&mut self, max: usize) -> Result<Vec<Received>, BrokerError> {
        let mut batch = Vec::new();
        loop {
            if *self.lost.borrow() {
                return Err(self.lost());
            }
            // Acks that failed show as soon as they are known, not only at the next ack.
            if self.confirming.as_ref().is_some_and(|h| h.is_finished()) {
                self.confirmed().await?;
            }
            while let Some(Some(m)) = self.advisories.next().now_or_never() {
                self.advised(&m);
            }
            while batch.len() < max
                && let Some(&a) = self.poison_due.front()
            {
                if let Some(r) = self.poison(a).await? {
                    batch.push(r);
                }
                self.poison_due.pop_front();
            }
            while batch.len() < max
                && let Some(m) = self.puller.ready()?
            {
                batch.extend(self.delivery(m));
            }
            if !batch.is_empty() {
                // The next batch is on its way while the caller commits this one.
                self.puller.request(max).await?;
                return Ok(batch);
            }
            self.puller.request(max).await?;
            let until = self.puller.until();
            let woken = tokio::select! {
                m = self.puller.next() => Woken::Delivery(m?),
                a = self.advisories.next() => Woken::Advisory(a),
                _ = tokio::time::sleep_until(until) => Woken::Expired,
                _ = self.lost.wait_for(|lost| *lost) => Woken::Lost,
            };
            match woken {
                Woken::Delivery(Some(m)) => batch.extend(self.delivery(m)),
                // The server ended the request: pull again.
                Woken::Delivery(None) => {}
                Woken::Advisory(Some(m)) => self.advised(&m),
                Woken::Advisory(None) | Woken::Lost => return Err(self.lost()),
                // Nothing for a whole pull: say so (an empty batch), so the bridge gets to
                // read the ack-pending count while the server delivers nothing; JetStream
                // goes silent exactly when that count reaches MaxAckPending.
                Woken::Expired => {
                    self.puller.expire();
                    return Ok(batch);
                }
            }
        }
    }

    /// A delivery as a [`Received`]; one whose reply subject is not a JetStream ack subject
    /// cannot be acked, and is left out.
    fn delivery(&mut self, m: async_nats::Message) -> Option<Received> {
        // async-nats reads the ack subject (`$JS.ACK.<stream>.<consumer>.<delivered>.…`).
        let m = jetstream::Message {
            message: m,
            context: self.js.clone(),
        };
        let (stream_seq, delivered, delivery) = match m.info() {
            Ok(i) => (
                i.stream_sequence,
                i.delivered,
                Delivery {
                    consumer_seq: i.consumer_sequence,
                    pending: i.pending,
                },
            ),
            Err(e) => {
                self.not_a_delivery(&m, &e.to_string());
                return None;
            }
        };
        let reply = m.reply.clone()?;
        let token = self.token(Held::Delivery(reply));
        let origin = Origin {
            stream: &self.stream_name,
            consumer: &self.consumer_name,
            subject: m.subject.as_str(),
            stream_seq,
            delivered,
            delivery: Some(delivery),
        };
        Some(message::received(
            &m.payload,
            m.headers.as_ref(),
            origin,
            token,
        ))
    }

    fn not_a_delivery(&self, m: &async_nats::Message, why: &str) {
        tracing::warn!(
            stream = %self.stream_name,
            consumer = %self.consumer_name,
            subject = %m.subject,
            why,
            "a message on the pull inbox is not a JetStream delivery: left out"
        );
    }

    fn advised(&mut self, m: &async_nats::Message) {
        match poison::parse(&m.payload) {
            Some(a) => self.poison_due.push_back(a),
            None => tracing::warn!(
                stream = %self.stream_name,
                consumer = %self.consumer_name,
                "an unreadable MAX_DELIVERIES advisory: ignored"
            ),
        }
    }

    /// The message an advisory names, read back by its stream sequence; `None` when the
    /// stream no longer holds it (removed by its limits or by hand).
    async fn poison(&mut self, a: Advisory) -> Result<Option<Received>, BrokerError> {
        use async_nats::jetstream::stream::RawMessageErrorKind;
        match self.stream.get_raw_message(a.stream_seq).await {
            Ok(m) => {
                let token = self.token(Held::Poison);
                Ok(Some(poison::received(
                    &m,
                    a,
                    &self.stream_name,
                    &self.consumer_name,
                    self.max_deliver,
                    token,
                )))
            }
            Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => {
                tracing::warn!(
                    stream = %self.stream_name,
                    consumer = %self.consumer_name,
                    stream_seq = a.stream_seq,
                    "JetStream gave up on a message the stream no longer holds: no poison task"
                );
                Ok(None)
            }
            Err(e) => Err(BrokerError::connection(
                format!(
                    "reading poison message {} of NATS stream {:?}",
                    a.stream_seq, self.stream_name
                ),
                e,
            )),
        }
    }
}

impl Consumer for JetStreamConsumer {
    fn next_batch(&mut self, max: usize) -> BoxFuture<'_, Result<Vec<Received>, BrokerError>> {
        Box::pin(self.take(max.max(1)))
    }

    fn ack(&mut self, tokens: Vec<AckToken>) -> BoxFuture<'_, Result<(), BrokerError>> {
        Box::pin(async move {
            // One batch's confirmations in flight at a time: the last one's first.
            self.confirmed().await?;
            let replies: Vec<Subject> = tokens
                .iter()
                .filter_map(|t| match self.outstanding.remove(t) {
                    Some(Held::Delivery(reply)) => Some(reply),
                    Some(Held::Poison) | None => None,
                })
                .collect();
            if replies.is_empty() {
                return Ok(());
            }
            let what = self.acking_what();
            self.confirming = Some(tokio::spawn(confirm(self.client.clone(), replies, what)));
            Ok(())
        })
    }

    fn settle_acks(&mut self) -> BoxFuture<'_, Result<(), BrokerError>> {
        Box::pin(self.confirmed())
    }

    fn ack_pending(&mut self) -> BoxFuture<'_, Result<Option<AckPending>, BrokerError>> {
        Box::pin(async move {
            let info = self.puller.consumer.get_info().await.map_err(|e| {
                BrokerError::connection(
                    format!(
                        "consumer info of NATS consumer {:?} of stream {:?}",
                        self.consumer_name, self.stream_name
                    ),
                    e,
                )
            })?;
            // MaxAckPending -1: no limit, nothing to approach.
            Ok(u64::try_from(info.config.max_ack_pending)
                .ok()
                .filter(|&max| max > 0)
                .map(|max| AckPending {
                    pending: info.num_ack_pending as u64,
                    max,
                }))
        })
    }
}

/// Sends each ack as JetStream's double ack does (`+ACK` as a request, answered once the
/// server has recorded it), on the client's shared request inbox rather than a subscription
/// per ack, all at once rather than one round trip after another; then waits for every
/// answer.
async fn confirm(client: Client, replies: Vec<Subject>, what: String) -> Result<(), BrokerError> {
    let client = &client;
    let acks = replies.iter().map(|reply| async move {
        let asked = client.request(reply.clone(), "+ACK".into());
        match tokio::time::timeout(API_TIMEOUT, asked).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {API_TIMEOUT:?}")),
        }
    });
    let acked = futures_util::future::join_all(acks).await;
    let failed: Vec<String> = acked.into_iter().filter_map(Result::err).collect();
    match failed.first() {
        None => Ok(()),
        Some(first) => Err(BrokerError::connection(
            format!(
                "{what}: {} of {} not confirmed",
                failed.len(),
                replies.len()
            ),
            std::io::Error::other(first.clone()),
        )),
    }
}
