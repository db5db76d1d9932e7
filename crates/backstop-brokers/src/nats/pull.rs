//! Pull requests answered on one inbox that lives as long as the consumer.
//!
//! One request is open at a time: `batch` messages at most, held by the server for
//! [`EXPIRES`] while none is there (no busy poll), then ended by a `408`. What the server
//! delivers lands in the inbox, so a `next_batch` dropped mid-wait loses nothing: the next
//! call finds it there. Messages of an open request that arrive after a batch is handed out
//! wait in the inbox for the next call (their AckWait runs meanwhile, as with a prefetch).

use crate::BrokerError;
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::consumer::pull::BatchConfig;
use async_nats::{Message, StatusCode, Subject, Subscriber};
use futures_util::{FutureExt, StreamExt};
use std::time::Duration;
use tokio::time::Instant;

/// How long the server holds a pull request while it has nothing to deliver.
const EXPIRES: Duration = Duration::from_secs(5);

/// Past the expiry, how long to wait for the server's `408` before taking the request as
/// ended anyway (and pulling again).
const EXPIRES_MARGIN: Duration = Duration::from_secs(5);

/// The open request.
struct Open {
    /// Deliveries still owed on it.
    remaining: usize,
    /// When it is taken as ended without a word from the server.
    until: Instant,
}

/// A consumer's pulls and their inbox.
pub(super) struct Puller {
    pub(super) consumer: PullConsumer,
    inbox: Subscriber,
    inbox_subject: Subject,
    open: Option<Open>,
    /// The consumer's `MaxRequestBatch` (0: none): a larger request is refused with a `409`.
    max_batch: usize,
    expires: Duration,
}

impl Puller {
    /// Subscribes the inbox. The caller flushes before pulling.
    pub(super) async fn new(
        client: &async_nats::Client,
        consumer: PullConsumer,
    ) -> Result<Self, BrokerError> {
        let inbox_subject = Subject::from(client.new_inbox());
        let inbox = client
            .subscribe(inbox_subject.clone())
            .await
            .map_err(|e| BrokerError::connection("subscribing the pull inbox", e))?;
        let config = &consumer.cached_info().config;
        let max_batch = usize::try_from(config.max_batch).unwrap_or(0);
        // A consumer's `MaxRequestExpires` refuses longer requests.
        let expires = match config.max_expires {
            d if d.is_zero() => EXPIRES,
            d => d.min(EXPIRES),
        };
        Ok(Puller {
            consumer,
            inbox,
            inbox_subject,
            open: None,
            max_batch,
            expires,
        })
    }

    /// Asks for up to `max` messages unless a request is open.
    pub(super) async fn request(&mut self, max: usize) -> Result<(), BrokerError> {
        if self.open.as_ref().is_some_and(|o| Instant::now() < o.until) {
            return Ok(());
        }
        let batch = match self.max_batch {
            0 => max,
            limit => max.min(limit),
        }
        .max(1);
        let request = BatchConfig {
            batch,
            expires: Some(self.expires),
            ..Default::default()
        };
        self.consumer
            .request_batch(request, self.inbox_subject.clone())
            .await
            .map_err(|e| BrokerError::connection(self.context("pulling from"), e))?;
        self.open = Some(Open {
            remaining: batch,
            until: Instant::now() + self.expires + EXPIRES_MARGIN,
        });
        Ok(())
    }

    /// When the open request is taken as ended without the server's word.
    pub(super) fn until(&self) -> Instant {
        self.open.as_ref().map_or_else(Instant::now, |o| o.until)
    }

    /// Waits for the inbox: a delivery, or `None` when the server ended the request.
    /// Cancel-safe: nothing is taken from the inbox unless returned.
    pub(super) async fn next(&mut self) -> Result<Option<Message>, BrokerError> {
        match self.inbox.next().await {
            Some(m) => self.sort(m),
            None => Err(self.closed()),
        }
    }

    /// A delivery already in the inbox, if any (statuses there are taken in passing).
    pub(super) fn ready(&mut self) -> Result<Option<Message>, BrokerError> {
        loop {
            match self.inbox.next().now_or_never() {
                None => return Ok(None),
                Some(None) => return Err(self.closed()),
                Some(Some(m)) => {
                    if let Some(m) = self.sort(m)? {
                        return Ok(Some(m));
                    }
                }
            }
        }
    }

    /// A delivery, or what a status message says of the open request.
    fn sort(&mut self, m: Message) -> Result<Option<Message>, BrokerError> {
        match m.status {
            None | Some(StatusCode::OK) => {
                if let Some(o) = &mut self.open {
                    o.remaining = o.remaining.saturating_sub(1);
                    if o.remaining == 0 {
                        self.open = None;
                    }
                }
                Ok(Some(m))
            }
            // Heartbeats are not asked for; one is harmless.
            Some(StatusCode::IDLE_HEARTBEAT) => Ok(None),
            // Expired (408), or nothing there for a no-wait request (404): pull again.
            Some(StatusCode::TIMEOUT | StatusCode::NOT_FOUND) => {
                self.open = None;
                Ok(None)
            }
            // 409 (consumer deleted, leadership change, a limit of the consumer's), 503 (no
            // JetStream behind the consumer): a new connection looks the consumer up again.
            Some(status) => {
                self.open = None;
                Err(BrokerError::connection(
                    self.context("pulling from"),
                    std::io::Error::other(format!(
                        "the server answered {status}: {}",
                        m.description.as_deref().unwrap_or("(no description)")
                    )),
                ))
            }
        }
    }

    /// Takes the open request as ended (its `408` did not come in time).
    pub(super) fn expire(&mut self) {
        self.open = None;
    }

    fn closed(&self) -> BrokerError {
        BrokerError::connection(
            self.context("pulling from"),
            std::io::Error::other("the connection closed"),
        )
    }

    fn context(&self, what: &str) -> String {
        let info = self.consumer.cached_info();
        format!(
            "{what} NATS consumer {:?} of stream {:?}",
            info.name, info.stream_name
        )
    }
}
