//! Why a broker call failed.

/// A broker call's failure.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The configuration cannot work against this broker (a queue declared with other
    /// arguments, a missing queue that may not be declared, a scheme no client speaks):
    /// retrying changes nothing, so a bridge refuses to start.
    #[error("{0}")]
    Config(String),
    /// The connection failed or was lost: the bridge reconnects, unacknowledged messages are
    /// delivered again.
    #[error("{context}: {source}")]
    Connection {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl BrokerError {
    /// A lost or failed connection, with what was being done.
    pub fn connection(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        BrokerError::Connection {
            context: context.into(),
            source: Box::new(source),
        }
    }

    /// Whether reconnecting may help.
    pub fn is_transient(&self) -> bool {
        matches!(self, BrokerError::Connection { .. })
    }
}
