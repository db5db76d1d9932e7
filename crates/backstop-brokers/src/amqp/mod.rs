//! RabbitMQ (AMQP 0-9-1): a consumer with manual acks and a prefetch window, and a publisher
//! in confirm mode.

pub(crate) mod consumer;
mod failure;
pub(crate) mod publisher;
mod value;
