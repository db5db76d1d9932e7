//! Checking a broker URL when the configuration is read, not at the first connection.

/// Which client a URL is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerKind {
    /// `amqp://` (RabbitMQ).
    Amqp,
    /// `redis://`.
    Redis,
    /// `nats://` (JetStream).
    Nats,
    /// `kafka://host:port[,host:port]` (bootstrap servers).
    Kafka,
}

/// Parses `url` with the client that will use it; the error says what to fix, without the
/// password.
pub fn check_url(url: &str) -> Result<BrokerKind, String> {
    let shown = backstop_core::broker::BrokerUrl::new(url).redacted();
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "{shown:?} has no scheme: use amqp://user:password@host:5672/vhost, redis://host:6379/0, kafka://host:9092 or nats://host:4222"
        ));
    };
    if rest.is_empty() {
        return Err(format!("{shown:?} has no host"));
    }
    match scheme.to_ascii_lowercase().as_str() {
        "amqp" => url
            .parse::<lapin::uri::AMQPUri>()
            .map(|_| BrokerKind::Amqp)
            .map_err(|e| format!("{shown:?} is not an AMQP URL: {e}")),
        "amqps" => Err(format!(
            "{shown:?}: amqps:// (TLS) is not built into this backstop; use amqp://"
        )),
        "redis" => ::redis::Client::open(url)
            .map(|_| BrokerKind::Redis)
            .map_err(|e| format!("{shown:?} is not a Redis URL: {e}")),
        "nats" => url
            .parse::<async_nats::ServerAddr>()
            .map(|_| BrokerKind::Nats)
            .map_err(|e| format!("{shown:?} is not a NATS URL: {e}")),
        "tls" => Err(format!(
            "{shown:?}: tls:// (NATS over TLS) is not built into this backstop; use nats://"
        )),
        "kafka" => crate::kafka::config::bootstrap_servers(url)
            .map(|_| BrokerKind::Kafka)
            .map_err(|e| format!("{shown:?} is not a Kafka URL: {e}")),
        s if s.starts_with("kafka+") || s == "kafkas" => Err(format!(
            "{shown:?}: {s}:// (TLS or SASL) is not built into this backstop; use kafka://"
        )),
        other => Err(format!(
            "{shown:?}: {other}:// is not a broker this backstop speaks (amqp://, redis://, kafka:// or nats://)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_by_their_client() {
        assert_eq!(
            check_url("amqp://guest:guest@127.0.0.1:5672/%2f"),
            Ok(BrokerKind::Amqp)
        );
        assert_eq!(check_url("redis://127.0.0.1:6379/0"), Ok(BrokerKind::Redis));
        assert_eq!(check_url("nats://127.0.0.1:4222"), Ok(BrokerKind::Nats));
        assert_eq!(
            check_url("nats://u:pw@127.0.0.1:4222"),
            Ok(BrokerKind::Nats)
        );
        let e = check_url("tls://u:pw@127.0.0.1:4222").unwrap_err();
        assert!(e.contains("use nats://") && !e.contains(":pw@"), "{e}");
        assert!(check_url("nats://127.0.0.1:notaport").is_err());
        let e = check_url("127.0.0.1:5672").unwrap_err();
        assert!(e.contains("no scheme"), "{e}");
        let e = check_url("kafka://secretuser:pw@h:9092").unwrap_err();
        assert!(e.contains("kafka://") && !e.contains(":pw@"), "{e}");
        assert_eq!(check_url("kafka://h:9092"), Ok(BrokerKind::Kafka));
        let e = check_url("kafka+ssl://h:9093").unwrap_err();
        assert!(e.contains("not built"), "{e}");
        assert!(check_url("amqp://").is_err());
    }
}
