//! The stream a bridge reads and its durable pull consumer: the stream must exist; the
//! consumer is created when missing and otherwise used as it is, provided it is a pull
//! consumer with explicit acks.

use crate::BrokerError;
use async_nats::jetstream::ErrorCode;
use async_nats::jetstream::consumer::{AckPolicy, PullConsumer, pull};
use async_nats::jetstream::context::{ConsumerInfoErrorKind, GetStreamErrorKind};
use async_nats::jetstream::{self, stream::Stream};
use backstop_core::broker::NatsConsumer;

/// The stream `c.stream`; a missing one is [`BrokerError::Config`] naming it.
pub(super) async fn stream(
    js: &jetstream::Context,
    c: &NatsConsumer,
    shown: &str,
) -> Result<Stream, BrokerError> {
    match js.get_stream(&c.stream).await {
        Ok(s) => Ok(s),
        Err(e) => match e.kind() {
            GetStreamErrorKind::JetStream(j) if j.error_code() == ErrorCode::STREAM_NOT_FOUND => {
                Err(BrokerError::Config(format!(
                    "NATS stream {:?} does not exist at {shown}: create it first (a bridge does not)",
                    c.stream
                )))
            }
            GetStreamErrorKind::InvalidStreamName | GetStreamErrorKind::EmptyName => Err(
                BrokerError::Config(format!("{:?} is not a NATS stream name: {e}", c.stream)),
            ),
            _ => Err(BrokerError::connection(
                format!("getting NATS stream {:?} at {shown}", c.stream),
                e,
            )),
        },
    }
}

/// The durable pull consumer `c.consumer` of `stream`, created as configured when missing.
/// An existing one keeps its own settings (a warning names those that differ from the
/// configuration); one that pushes or does not take explicit acks is refused.
pub(super) async fn consumer(
    stream: &Stream,
    c: &NatsConsumer,
) -> Result<PullConsumer, BrokerError> {
    let context = || format!("NATS consumer {:?} of stream {:?}", c.consumer, c.stream);
    // Looked up before any create: on nats-server 2.9 a create naming an existing durable
    // with other settings updates it in place (2.10's `action: create` refuses instead), and
    // a bridge must not overwrite the settings of a consumer someone made.
    // Twice at most: a consumer created by another bridge between our look and our create
    // is found on the second look.
    for _ in 0..2 {
        match stream.consumer_info(&c.consumer).await {
            Ok(info) => {
                check(&info.config, c)?;
                return stream
                    .get_consumer::<pull::Config>(&c.consumer)
                    .await
                    .map_err(|e| BrokerError::Connection {
                        context: context(),
                        source: e,
                    });
            }
            Err(e) if e.kind() == ConsumerInfoErrorKind::NotFound => {}
            Err(e) if e.kind() == ConsumerInfoErrorKind::InvalidName => {
                return Err(BrokerError::Config(format!(
                    "{:?} is not a NATS consumer name: {e}",
                    c.consumer
                )));
            }
            Err(e) => return Err(BrokerError::connection(context(), e)),
        }
        match stream.create_consumer(config(c)).await {
            Ok(created) => return Ok(created),
            Err(e) => match e.kind() {
                // The server refused this configuration (a filter outside the stream's
                // subjects, a bad limit): retrying cannot help.
                jetstream::stream::ConsumerErrorKind::JetStream(j)
                    if j.error_code() != ErrorCode::CONSUMER_NAME_EXIST
                        && j.error_code() != ErrorCode::CONSUMER_ALREADY_EXISTS =>
                {
                    return Err(BrokerError::Config(format!("creating {}: {j}", context())));
                }
                jetstream::stream::ConsumerErrorKind::JetStream(_) => {}
                _ => {
                    return Err(BrokerError::connection(
                        format!("creating {}", context()),
                        e,
                    ));
                }
            },
        }
    }
    Err(BrokerError::Config(format!(
        "{}: neither found nor created (created and deleted meanwhile?)",
        context()
    )))
}

/// The consumer a bridge creates: durable, pulled, explicit acks, from the first message of
/// the stream (what was published before the bridge first ran becomes tasks too).
fn config(c: &NatsConsumer) -> pull::Config {
    pull::Config {
        durable_name: Some(c.consumer.clone()),
        ack_policy: AckPolicy::Explicit,
        ack_wait: c.ack_wait,
        max_deliver: c.max_deliver,
        max_ack_pending: c.max_ack_pending,
        filter_subject: c.subject.clone().unwrap_or_default(),
        ..Default::default()
    }
}

/// Refuses an existing consumer a bridge cannot use safely, and says which of its settings
/// rule over the configuration.
fn check(found: &jetstream::consumer::Config, c: &NatsConsumer) -> Result<(), BrokerError> {
    let name = format!("NATS consumer {:?} of stream {:?}", c.consumer, c.stream);
    if let Some(subject) = &found.deliver_subject {
        return Err(BrokerError::Config(format!(
            "{name} is a push consumer (deliver subject {subject:?}): a bridge needs a pull consumer"
        )));
    }
    if found.ack_policy != AckPolicy::Explicit {
        return Err(BrokerError::Config(format!(
            "{name} acks {:?}, not Explicit: a bridge acks each message only once its task is committed",
            found.ack_policy
        )));
    }
    let wanted = c.subject.clone().unwrap_or_default();
    if found.ack_wait != c.ack_wait
        || found.max_deliver != c.max_deliver
        || found.max_ack_pending != c.max_ack_pending
        || found.filter_subject != wanted
    {
        tracing::warn!(
            stream = %c.stream,
            consumer = %c.consumer,
            ack_wait = ?found.ack_wait,
            max_deliver = found.max_deliver,
            max_ack_pending = found.max_ack_pending,
            filter_subject = %found.filter_subject,
            "the existing NATS consumer's settings differ from the configuration: its own rule"
        );
    }
    Ok(())
}

/// Deletes the stream of `c` with its consumers and messages (a missing stream is fine).
pub(crate) async fn delete_stream(
    url: &backstop_core::broker::BrokerUrl,
    c: &NatsConsumer,
) -> Result<(), BrokerError> {
    let conn = super::connection::open(url, "backstop delete").await?;
    let js = jetstream::new(conn.client);
    match js.delete_stream(&c.stream).await {
        Ok(_) => Ok(()),
        Err(e) => match e.kind() {
            jetstream::context::DeleteStreamErrorKind::JetStream(j)
                if j.error_code() == ErrorCode::STREAM_NOT_FOUND =>
            {
                Ok(())
            }
            _ => Err(BrokerError::connection(
                format!("deleting NATS stream {:?} at {}", c.stream, url.redacted()),
                e,
            )),
        },
    }
}
