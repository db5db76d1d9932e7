//! `[bridges.NAME]`: consumers that put a broker's messages in the ledger. Each names its
//! broker, what it consumes (an AMQP `queue`, a Redis list `queue`, or a Redis `stream` with a
//! `group`), the configured `kind` each message becomes and where the business `key` comes
//! from. Checked when the file is read.

use super::{ConfigError, Invalid, bridge_sources};
use backstop_brokers::{BrokerKind, check_url};
use backstop_core::broker::{BridgeConfig, BridgeSource, BrokerUrl, KeySource, rejected_kind};
use backstop_core::{KindConfig, validate};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Default unacknowledged messages per bridge.
const DEFAULT_PREFETCH: u16 = 64;
/// Default largest message: 1 MiB.
const DEFAULT_MAX_MESSAGE: usize = 1 << 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBridge {
    pub(super) broker: Option<String>,
    pub(super) queue: Option<String>,
    pub(super) stream: Option<String>,
    pub(super) group: Option<String>,
    pub(super) consumer: Option<String>,
    pub(super) processing: Option<String>,
    pub(super) kind: Option<String>,
    pub(super) key: Option<String>,
    pub(super) prefetch: Option<u16>,
    pub(super) dead_letters: Option<bool>,
    pub(super) queue_type: Option<String>,
    pub(super) durable: Option<bool>,
    pub(super) dead_letter_exchange: Option<String>,
    pub(super) declare: Option<bool>,
    pub(super) max_message: Option<usize>,
    pub(super) claim_idle: Option<String>,
}

/// Checks every bridge against the configured kinds; an error names the key
/// (`bridges."sms-in".queue`).
pub(super) fn bridges(
    raw: BTreeMap<String, RawBridge>,
    kinds: &[KindConfig],
    invalid: Invalid,
) -> Result<Vec<BridgeConfig>, ConfigError> {
    let mut out = Vec::new();
    for (name, b) in raw {
        let at = |field: &str| format!("bridges.{name:?}.{field}");
        validate::kind(&rejected_kind(&name)).map_err(|e| {
            invalid(
                format!("bridges.{name:?}"),
                format!("the name makes the kind of its rejects, backstop.rejected.{name}: {e}"),
            )
        })?;
        let url = b
            .broker
            .clone()
            .ok_or_else(|| invalid(at("broker"), "missing: the broker's URL".into()))?;
        let broker_kind = check_url(&url).map_err(|m| invalid(at("broker"), m))?;
        let kind = b.kind.clone().ok_or_else(|| {
            invalid(
                at("kind"),
                "missing: the configured kind each message becomes".into(),
            )
        })?;
        if !kinds.iter().any(|k| k.name == kind) {
            let mut names: Vec<&str> = kinds.iter().map(|k| k.name.as_str()).collect();
            names.sort();
            return Err(invalid(
                at("kind"),
                format!(
                    "{kind:?} is not a configured kind (configured: {})",
                    names.join(", ")
                ),
            ));
        }
        let source = match broker_kind {
            BrokerKind::Amqp => bridge_sources::amqp(&b, &at),
            BrokerKind::Redis => bridge_sources::redis(&b, &name, &at),
        }
        .map_err(|(key, m)| invalid(key, m))?;
        let key = match (&b.key, &source) {
            (Some(k), _) => KeySource::parse(k).map_err(|m| invalid(at("key"), m))?,
            (None, BridgeSource::RedisList { .. }) => {
                return Err(invalid(
                    at("key"),
                    "missing: a list item has no id, so name its key: a JSON pointer (\"/order_id\")".into(),
                ));
            }
            (None, _) => KeySource::MessageId,
        };
        if matches!(
            (&key, &source),
            (
                KeySource::Field(_),
                BridgeSource::AmqpQueue(_) | BridgeSource::RedisList { .. }
            )
        ) {
            return Err(invalid(
                at("key"),
                "field:NAME is a Redis stream entry's field; use header:NAME or a JSON pointer"
                    .into(),
            ));
        }
        let prefetch = b.prefetch.unwrap_or(DEFAULT_PREFETCH);
        if prefetch == 0 {
            return Err(invalid(at("prefetch"), "must be at least 1".into()));
        }
        out.push(BridgeConfig {
            name: name.clone(),
            broker: BrokerUrl::new(url),
            source,
            kind,
            key,
            prefetch,
            dead_letters: b.dead_letters.unwrap_or(false),
            max_message: b.max_message.unwrap_or(DEFAULT_MAX_MESSAGE),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::config::tests::assert_refused;
    use backstop_core::broker::{BridgeSource, KeySource};

    const KINDS: &str = "[kinds.\"sms.send\"]\ntarget = \"pull\"\n";

    #[test]
    fn reads_the_bridges_of_the_contract() {
        let c = Config::parse(
            &format!(
                r#"{KINDS}
            [bridges.sms-in]
            broker = "amqp://guest:guest@127.0.0.1:5672/%2f"
            queue = "sms.requests"
            kind = "sms.send"
            key = "/order_id"
            prefetch = 64
            dead_letters = false
            [bridges.sms-list]
            broker = "redis://127.0.0.1:6379/0"
            queue = "sms"
            kind = "sms.send"
            key = "header:x-id"
            [bridges.sms-stream]
            broker = "redis://127.0.0.1:6379/0"
            stream = "sms"
            group = "backstop"
            kind = "sms.send"
            key = "field:order"
            "#
            ),
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.bridges.len(), 3);
        let amqp = &c.bridges[0];
        assert_eq!(amqp.name, "sms-in");
        assert_eq!(amqp.key, KeySource::Pointer("/order_id".into()));
        assert!(
            matches!(&amqp.source, BridgeSource::AmqpQueue(q) if q.queue == "sms.requests" && q.durable && q.declare)
        );
        assert!(
            matches!(&c.bridges[1].source, BridgeSource::RedisList { processing, .. } if processing == "backstop:processing:sms-list")
        );
        assert!(
            matches!(&c.bridges[2].source, BridgeSource::RedisStream { group, consumer, .. } if group == "backstop" && consumer == "sms-stream")
        );
    }

    #[test]
    fn a_bad_bridge_fails_at_load_naming_the_key() {
        let with = |body: &str| format!("{KINDS}[bridges.b]\n{body}");
        let cases = [
            (
                with("queue = \"q\"\nkind = \"sms.send\""),
                "bridges.\"b\".broker: missing",
            ),
            (
                with("broker = \"localhost:5672\"\nqueue = \"q\"\nkind = \"sms.send\""),
                "bridges.\"b\".broker: \"localhost:5672\" has no scheme",
            ),
            (
                with("broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.sent\""),
                "bridges.\"b\".kind: \"sms.sent\" is not a configured kind (configured: sms.send)",
            ),
            (
                with("broker = \"amqp://h\"\nkind = \"sms.send\""),
                "bridges.\"b\".queue: missing",
            ),
            (
                with(
                    "broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.send\"\nkey = \"order_id\"",
                ),
                "bridges.\"b\".key: \"order_id\" is not a key source",
            ),
            (
                with("broker = \"redis://h\"\nqueue = \"q\"\nkind = \"sms.send\""),
                "bridges.\"b\".key: missing",
            ),
            (
                with("broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.send\"\nstream = \"s\""),
                "bridges.\"b\".stream: only a Redis bridge",
            ),
            (
                with("broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.send\"\nprefetch = 0"),
                "bridges.\"b\".prefetch: must be at least 1",
            ),
            (
                with(
                    "broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.send\"\nqueue_type = \"fast\"",
                ),
                "bridges.\"b\".queue_type",
            ),
            (
                with("broker = \"amqp://h\"\nqueue = \"q\"\nkind = \"sms.send\"\nprefech = 3"),
                "unknown field `prefech`",
            ),
        ];
        let cases: Vec<(&str, &str)> = cases.iter().map(|(a, b)| (a.as_str(), *b)).collect();
        assert_refused(&cases);
    }
}
