//! Broker clients of backstop, knowing nothing of the ledger: a [`Consumer`] hands out
//! messages and acknowledges them only when its caller says their tasks are committed; a
//! [`Publisher`] answers [`Published::Confirmed`] only when the broker has confirmed.
//!
//! | module | what |
//! |---|---|
//! | `message` | a received message, its ack token, an outgoing publish |
//! | `error` | why a broker call failed, and whether retrying can help |
//! | `consume` | the [`Consumer`] trait and [`connect_consumer`] |
//! | `publish` | the [`Publisher`] trait and [`publisher`] |
//! | `amqp` | RabbitMQ: manual-ack consumer, confirmed publisher |
//! | `url` | [`check_url`]: a broker URL checked by its client when the config is read |
//! | `redis` | Redis: reliable list and stream consumers, list and stream publisher |
//! | `nats` | NATS JetStream: durable pull consumer with confirmed acks, PubAck publisher |
//! | `kafka` | Kafka: consumer group member committing what is acked, idempotent producer |

mod amqp;
mod consume;
mod error;
mod kafka;
mod message;
mod nats;
mod publish;
mod redis;
mod url;

pub use consume::{AckPending, Consumer, connect_consumer, delete_source};
pub use error::BrokerError;
pub use message::{AckToken, Outgoing, Received};
pub use publish::{Published, Publisher, publisher};
pub use url::{BrokerKind, check_url};

use std::future::Future;
use std::pin::Pin;

/// A boxed future, so that `dyn Consumer` and `dyn Publisher` work.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
