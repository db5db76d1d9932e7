//! A `kafka://host:port[,host:port]` URL as librdkafka's `bootstrap.servers`, and the settings
//! every client of backstop's shares.

use backstop_core::broker::BrokerUrl;
use rdkafka::ClientConfig;
use std::time::Duration;

/// How long connecting waits for the cluster's metadata: librdkafka itself retries an
/// unreachable broker for ever, so a bridge would never learn that it cannot connect.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The bootstrap servers of a `kafka://` URL, `host:port,host:port`; the error says what to
/// fix without repeating the URL (its caller shows the redacted one).
pub(crate) fn bootstrap_servers(url: &str) -> Result<String, String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("no scheme: use kafka://host:9092".into());
    };
    if !scheme.eq_ignore_ascii_case("kafka") {
        return Err(format!(
            "{scheme}:// (TLS or SASL) is not built into this backstop; use kafka://"
        ));
    }
    // A trailing `/` is harmless; a path, a query or credentials mean something we ignore.
    let servers = rest.strip_suffix('/').unwrap_or(rest);
    if servers.contains('@') {
        return Err("credentials (SASL) are not built into this backstop".into());
    }
    if servers.contains(['/', '?', '#']) {
        return Err("a kafka:// URL is bootstrap servers only: kafka://host:9092,host:9092".into());
    }
    let mut out = Vec::new();
    for pair in servers.split(',') {
        out.push(host_port(pair)?);
    }
    Ok(out.join(","))
}

/// One `host:port` (`[v6]:port` too), checked.
fn host_port(pair: &str) -> Result<&str, String> {
    let Some((host, port)) = pair.rsplit_once(':') else {
        return Err(format!("{pair:?} has no port: use host:9092"));
    };
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let host_ok = !bare.is_empty()
        && bare
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
    if !host_ok {
        return Err(format!("{pair:?}: {host:?} is not a host name"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(pair),
        _ => Err(format!("{pair:?}: {port:?} is not a port")),
    }
}

/// The settings shared by consumers and producers: where to connect, and who we are.
pub(crate) fn client_config(url: &BrokerUrl) -> Result<ClientConfig, String> {
    let servers = bootstrap_servers(url.expose())?;
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", servers)
        .set("client.id", "backstop")
        // librdkafka's own log lines go to `tracing` through rdkafka's log context at warn
        // and above; its debug contexts stay off.
        .set_log_level(rdkafka::config::RDKafkaLogLevel::Warning);
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_servers_are_host_port_pairs() {
        assert_eq!(bootstrap_servers("kafka://h:9092"), Ok("h:9092".into()));
        assert_eq!(
            bootstrap_servers("KAFKA://a:1,b.example:2,[::1]:3/"),
            Ok("a:1,b.example:2,[::1]:3".into())
        );
        for bad in [
            "kafka://h",
            "kafka://h:0",
            "kafka://h:x",
            "kafka://:9092",
            "kafka://a:1,",
            "kafka://h:9092/topic",
            "kafka://u:p@h:9092",
            "kafka+ssl://h:9093",
            "h:9092",
        ] {
            assert!(bootstrap_servers(bad).is_err(), "{bad}");
        }
    }
}
