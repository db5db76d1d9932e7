//! Telling a broker's refusal of the configuration from a lost connection.

use crate::BrokerError;
use lapin::ErrorKind;
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};

/// The broker's own error, when it answered one (a channel or connection close).
pub(crate) fn broker_refusal(e: &lapin::Error) -> Option<(AMQPSoftError, String)> {
    match e.kind() {
        ErrorKind::ProtocolError(amqp) => match amqp.kind() {
            AMQPErrorKind::Soft(soft) => Some((soft.clone(), amqp.get_message().to_string())),
            AMQPErrorKind::Hard(_) => None,
        },
        _ => None,
    }
}

/// A failed call: the broker refusing what the configuration asks (a queue declared with
/// other arguments, a missing queue, no access) is [`BrokerError::Config`]; anything else
/// is a lost connection.
pub(crate) fn classify(context: String, e: lapin::Error) -> BrokerError {
    match broker_refusal(&e) {
        Some((
            AMQPSoftError::PRECONDITIONFAILED
            | AMQPSoftError::NOTFOUND
            | AMQPSoftError::ACCESSREFUSED,
            text,
        )) => BrokerError::Config(format!("{context}: {text}")),
        _ => BrokerError::connection(context, e),
    }
}
