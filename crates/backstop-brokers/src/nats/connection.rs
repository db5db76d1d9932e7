//! Opening a NATS connection, checking the server can do what backstop asks of it, and what
//! a failed call means.

use crate::BrokerError;
use async_nats::{Client, ConnectErrorKind, ConnectOptions, Event};
use backstop_core::broker::BrokerUrl;
use std::time::Duration;
use tokio::sync::watch;

/// The oldest nats-server spoken to: 2.9 brought the consumer create API that names the
/// consumer and its filter in the subject, which async-nats uses.
const MIN_SERVER: (u64, u64) = (2, 9);

/// How long a JetStream API call (stream and consumer info, create, get message) and a
/// double ack may wait for the server's answer.
pub(crate) const API_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection and whether it has been lost since it was opened.
pub(crate) struct Connection {
    pub(crate) client: Client,
    /// Turns `true` at the first disconnection and stays so: what was pulled on the lost
    /// connection (open pull requests, double acks in flight) is gone, so the owner starts
    /// over on a new connection instead of carrying on with async-nats's own reconnect.
    pub(crate) lost: watch::Receiver<bool>,
}

/// Connects to `url` as `name` and checks the server: JetStream enabled, version 2.9 or
/// later. Refused credentials and an unfit server are [`BrokerError::Config`].
pub(crate) async fn open(url: &BrokerUrl, name: &str) -> Result<Connection, BrokerError> {
    let (lost_tx, lost) = watch::channel(false);
    let shown = url.redacted();
    let events_of = shown.clone();
    let options = ConnectOptions::new()
        .name(name)
        .connection_timeout(API_TIMEOUT)
        // One reconnect attempt at most: the owner drops a lost connection and opens another,
        // and a dropped client whose server stays down must not go on retrying in the
        // background for ever.
        .max_reconnects(1)
        .event_callback(move |event| {
            let lost_tx = lost_tx.clone();
            let url = events_of.clone();
            async move {
                match event {
                    Event::Disconnected | Event::Closed => {
                        lost_tx.send_replace(true);
                    }
                    Event::SlowConsumer(sid) => tracing::warn!(
                        %url,
                        sid,
                        "NATS subscription too slow: messages dropped (delivered again after AckWait)"
                    ),
                    Event::ServerError(e) => tracing::warn!(%url, error = %e, "NATS server error"),
                    Event::LameDuckMode => {
                        tracing::info!(%url, "NATS server entering lame duck mode")
                    }
                    _ => {}
                }
            }
        });
    let client = options
        .connect(url.expose())
        .await
        .map_err(|e| match e.kind() {
            ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => {
                BrokerError::Config(format!("connecting to NATS at {shown}: {e}"))
            }
            _ => BrokerError::connection(format!("connecting to NATS at {shown}"), e),
        })?;
    check_server(&client, &shown)?;
    Ok(Connection { client, lost })
}

/// Refuses a server without JetStream or older than [`MIN_SERVER`], in one line, instead of
/// letting its first API call time out or fail obscurely.
fn check_server(client: &Client, shown: &str) -> Result<(), BrokerError> {
    let info = client.server_info();
    if !info.jetstream {
        return Err(BrokerError::Config(format!(
            "NATS at {shown} has JetStream disabled (start nats-server with -js)"
        )));
    }
    match version(&info.version) {
        Some(v) if v >= MIN_SERVER => Ok(()),
        _ => Err(BrokerError::Config(format!(
            "NATS at {shown} is nats-server {:?}: backstop needs {}.{} or later",
            info.version, MIN_SERVER.0, MIN_SERVER.1
        ))),
    }
}

/// Major and minor of a server version (`2.9.10`, `2.10.0-beta.1`).
fn version(v: &str) -> Option<(u64, u64)> {
    let mut parts = v.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::version;

    #[test]
    fn server_versions_are_read_by_major_and_minor() {
        assert_eq!(version("2.9.10"), Some((2, 9)));
        assert_eq!(version("2.10.0-beta.1"), Some((2, 10)));
        assert!(version("2.10.0").unwrap() > (2, 9));
        assert!(version("2.8.4").unwrap() < (2, 9));
        assert_eq!(version("dev"), None);
    }
}
