//! A Kafka topic read by a consumer group whose offsets are committed only up to what the
//! ledger holds: auto-commit and the auto offset store are off, and an ack commits, per
//! partition, past the messages that are acknowledged with every one before them.
//!
//! Messages are moved into the consumer's own queue as librdkafka yields them, before the
//! batch is handed out: a `next_batch` dropped mid-way leaves them there for the next call,
//! so every message read is handed out once per connection. Dropping the consumer closes
//! it (blocking until librdkafka has left the group): the revocation this brings commits
//! what is acknowledged, and the group's other members take its partitions at once.

use super::commit::{commit, is_rebalancing};
use super::config::{CONNECT_TIMEOUT, client_config};
use super::offsets::Offsets;
use super::rebalance::Context;
use super::record;
use crate::{AckToken, BoxFuture, BrokerError, Consumer, Received};
use backstop_core::broker::BrokerUrl;
use futures_util::FutureExt;
use rdkafka::consumer::{Consumer as _, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Message};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

/// A connected topic consumer.
pub(crate) struct KafkaConsumer {
    /// Shared with the blocking tasks that commit and check metadata; taken by `drop`.
    consumer: Option<Arc<StreamConsumer<Context>>>,
    offsets: Arc<Mutex<Offsets>>,
    topic: String,
    group: String,
    /// Read and not yet handed out.
    ready: VecDeque<Received>,
    /// An error met while filling a batch, reported by the next call.
    failed: Option<BrokerError>,
}

/// Creates the group member, checks the topic exists (within [`CONNECT_TIMEOUT`]) and
/// subscribes. A missing topic is a [`BrokerError::Config`]: topics are not created here.
pub(crate) async fn connect(
    url: &BrokerUrl,
    topic: &str,
    group: &str,
) -> Result<KafkaConsumer, BrokerError> {
    let mut config = client_config(url).map_err(|e| BrokerError::Config(format!("{url}: {e}")))?;
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        // A new group reads what was produced before the bridge first ran, as a new Redis
        // stream group does, instead of skipping it unseen.
        .set("auto.offset.reset", "earliest")
        .set("allow.auto.create.topics", "false")
        .set("enable.partition.eof", "false")
        // A member that dies (a killed process) holds its partitions until the group
        // notices: 10 s instead of librdkafka's 45 s, so a restarted bridge resumes soon.
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "3000");
    let offsets = Arc::new(Mutex::new(Offsets::default()));
    let context = Context {
        topic: topic.to_string(),
        group: group.to_string(),
        offsets: offsets.clone(),
    };
    let consumer: StreamConsumer<Context> = config
        .create_with_context(context)
        .map_err(|e| BrokerError::Config(format!("kafka consumer for {url}: {e}")))?;
    let consumer = Arc::new(consumer);
    check_topic(&consumer, url, topic).await?;
    consumer
        .subscribe(&[topic])
        .map_err(|e| BrokerError::connection(format!("subscribing to topic {topic:?}"), e))?;
    Ok(KafkaConsumer {
        consumer: Some(consumer),
        offsets,
        topic: topic.to_string(),
        group: group.to_string(),
        ready: VecDeque::new(),
        failed: None,
    })
}

/// Asks the cluster for the topic's metadata: a broker that does not answer in time is a
/// connection error, a topic it does not know a configuration error.
async fn check_topic(
    consumer: &Arc<StreamConsumer<Context>>,
    url: &BrokerUrl,
    topic: &str,
) -> Result<(), BrokerError> {
    let c = consumer.clone();
    let t = topic.to_string();
    let context = || format!("reading the metadata of topic {topic:?} from {url}");
    let metadata = tokio::task::spawn_blocking(move || c.fetch_metadata(Some(&t), CONNECT_TIMEOUT))
        .await
        .map_err(|e| BrokerError::connection(context(), e))?
        .map_err(|e| BrokerError::connection(context(), e))?;
    let Some(found) = metadata.topics().iter().find(|m| m.name() == topic) else {
        return Err(missing(topic, url));
    };
    match found.error().map(RDKafkaErrorCode::from) {
        None if found.partitions().is_empty() => Err(missing(topic, url)),
        None => Ok(()),
        Some(RDKafkaErrorCode::UnknownTopicOrPartition) => Err(missing(topic, url)),
        Some(code) => Err(BrokerError::connection(
            context(),
            KafkaError::MetadataFetch(code),
        )),
    }
}

fn missing(topic: &str, url: &BrokerUrl) -> BrokerError {
    BrokerError::Config(format!(
        "kafka topic {topic:?} does not exist on {url}: create it first"
    ))
}

impl Drop for KafkaConsumer {
    /// librdkafka's close blocks until the member has left the group (committing what its
    /// revocation holds), which takes as long as the broker makes it: on a blocking thread,
    /// not on the runtime's, where it would stall every other loop of the engine.
    fn drop(&mut self) {
        let Some(consumer) = self.consumer.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(move || drop(consumer))),
            Err(_) => drop(consumer),
        }
    }
}

impl KafkaConsumer {
    /// The librdkafka consumer, there from connect until drop.
    fn consumer(&self) -> Arc<StreamConsumer<Context>> {
        self.consumer.clone().expect("open until dropped")
    }

    fn context(&self, what: &str) -> String {
        format!("{what} topic {:?} group {:?}", self.topic, self.group)
    }

    /// One message read: tracked, and queued to be handed out.
    fn queue(&mut self, m: &BorrowedMessage<'_>) {
        let token = self
            .offsets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .deliver(m.partition(), m.offset());
        self.ready.push_back(record::received(m, token));
    }

    /// What a consumer error means: a message-level or fatal error ends the connection;
    /// a non-fatal transport error is librdkafka's to recover from (it reconnects itself).
    fn error(&self, e: KafkaError) -> Option<BrokerError> {
        let recoverable = matches!(e, KafkaError::MessageConsumption(_))
            && e.rdkafka_error_code() == Some(RDKafkaErrorCode::BrokerTransportFailure);
        if recoverable {
            tracing::warn!(topic = %self.topic, group = %self.group, error = %e, "kafka consumer: a broker connection failed; librdkafka reconnects");
            return None;
        }
        Some(BrokerError::connection(self.context("consuming"), e))
    }

    /// Up to `max` queued messages, leaving out those of partitions revoked since they were
    /// read (their new owner reads them again).
    fn hand_out(&mut self, max: usize) -> Vec<Received> {
        let offsets = self.offsets.lock().unwrap_or_else(PoisonError::into_inner);
        let mut batch = Vec::new();
        while batch.len() < max {
            let Some(r) = self.ready.pop_front() else {
                break;
            };
            if offsets.is_live(r.token) {
                batch.push(r);
            }
        }
        batch
    }
}

impl Consumer for KafkaConsumer {
    fn next_batch(&mut self, max: usize) -> BoxFuture<'_, Result<Vec<Received>, BrokerError>> {
        Box::pin(async move {
            let max = max.max(1);
            // A clone to read through, so that a message borrows it and not `self`.
            let consumer = self.consumer();
            loop {
                if let Some(e) = self.failed.take() {
                    return Err(e);
                }
                // The queue first: what a dropped call read, or what a full batch left.
                while self.ready.len() < max {
                    match consumer.recv().now_or_never() {
                        Some(Ok(m)) => self.queue(&m),
                        Some(Err(e)) => {
                            self.failed = self.error(e);
                            break;
                        }
                        None => break,
                    }
                }
                let batch = self.hand_out(max);
                if !batch.is_empty() {
                    return Ok(batch);
                }
                if let Some(e) = self.failed.take() {
                    return Err(e);
                }
                // Nothing here: wait for one. `recv` is cancel-safe (a message is taken
                // only when it is returned), and the message is queued before any await.
                match consumer.recv().await {
                    Ok(m) => self.queue(&m),
                    Err(e) => self.failed = self.error(e),
                }
            }
        })
    }

    fn ack(&mut self, tokens: Vec<AckToken>) -> BoxFuture<'_, Result<(), BrokerError>> {
        Box::pin(async move {
            if tokens.is_empty() {
                return Ok(());
            }
            let consumer = self.consumer();
            let offsets = self.offsets.clone();
            let topic = self.topic.clone();
            // A synchronous commit blocks on the broker: off the runtime's threads. The lock
            // is held until the broker answers, so a revocation waits for this commit.
            let committed = tokio::task::spawn_blocking(move || {
                let mut offsets = offsets.lock().unwrap_or_else(PoisonError::into_inner);
                let commits = offsets.ack(&tokens);
                match commit(&*consumer, &topic, &commits) {
                    Ok(()) => {
                        offsets.committed(&commits);
                        Ok(())
                    }
                    Err(e) if is_rebalancing(&e) => {
                        tracing::info!(topic = %topic, ?commits, error = %e, "kafka commit deferred: the group is rebalancing");
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            })
            .await;
            match committed {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(BrokerError::connection(self.context("committing"), e)),
                Err(e) => Err(BrokerError::connection(self.context("committing"), e)),
            }
        })
    }
}
