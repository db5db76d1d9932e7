//! NATS JetStream: a durable pull consumer with explicit, confirmed acks (messages JetStream
//! gave up on after `MaxDeliver` handed out as poison), and a publisher whose success is the
//! stream's PubAck.
//!
//! Plain `nats://` only (no TLS built in). The server must be nats-server 2.9 or later with
//! JetStream enabled; [`connection::open`] says so in one line when it is not.

pub(crate) mod connection;
pub(crate) mod consumer;
mod durable;
mod message;
mod poison;
pub(crate) mod publisher;
mod pull;

pub(crate) use durable::delete_stream;
