//! Kafka: a topic of the run's own per measurement, created here through the admin API
//! (bridges never create topics, and Tansu does not auto-create them), read by a consumer
//! group of its own.
//!
//! The topics are left on the broker, not deleted: on Tansu 0.6 (the test broker), deleting
//! a topic makes it answer other consumers' fetches with a leader-change tag and no topic id,
//! on which librdkafka crashes (a null topic name looked up), taking down any process with a
//! consumer running at the time, a bridge of someone else's included. Each name is unique to
//! the run, so a topic left behind is never read again.

use super::{Broker, within};
use anyhow::{Context as _, Result, bail};
use backstop_core::broker::{BridgeConfig, BridgeSource, Destination};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use std::time::Duration;

/// Partitions of each topic: records spread by key over several, as in a real topic, so the
/// group member fetches more than one partition (and commits per partition) as a bridge does.
const PARTITIONS: i32 = 4;

/// How long the broker may take to create a topic.
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);

/// The run's topics on one Kafka cluster.
pub(super) struct Topic {
    url: String,
    run: String,
    admin: AdminClient<DefaultClientContext>,
}

impl Topic {
    /// Topics named after run `run` on the cluster at `url` (a checked `kafka://` URL).
    pub(super) fn new(url: &str, run: &str) -> Result<Self> {
        // `kafka://host:port,host:port[/]`, checked by `check_url`: the bootstrap servers.
        let servers = url.split_once("://").map_or(url, |(_, s)| s);
        let admin = ClientConfig::new()
            .set("bootstrap.servers", servers.trim_end_matches('/'))
            .set("client.id", "backstop-bench")
            .set_log_level(rdkafka::config::RDKafkaLogLevel::Warning)
            .create()
            .context("making the Kafka admin client")?;
        Ok(Topic {
            url: url.to_string(),
            run: run.to_string(),
            admin,
        })
    }
}

impl Broker for Topic {
    fn channel(&self) -> &'static str {
        "kafka"
    }

    fn url(&self) -> &str {
        &self.url
    }

    async fn source(&self, what: &str) -> Result<BridgeSource> {
        let topic = format!("backstop.bench.{}.{what}", self.run);
        let new = NewTopic::new(&topic, PARTITIONS, TopicReplication::Fixed(1));
        // librdkafka retries an unreachable broker for ever; the request timeout bounds it,
        // and `within` bounds the call should the timeout not fire.
        let options = AdminOptions::new()
            .operation_timeout(Some(CREATE_TIMEOUT))
            .request_timeout(Some(CREATE_TIMEOUT));
        let creating = format!("creating Kafka topic {topic:?}");
        let results = within(&creating, self.admin.create_topics([&new], &options))
            .await?
            .with_context(|| creating.clone())?;
        for r in results {
            // An existing topic is an error too: its records would be counted as ours.
            if let Err((_, code)) = r {
                bail!("{creating}: {code}");
            }
        }
        Ok(BridgeSource::KafkaTopic {
            group: format!("backstop-bench-{}-{what}", self.run),
            topic,
        })
    }

    fn destination(&self, source: &BridgeSource) -> Destination {
        match source {
            BridgeSource::KafkaTopic { topic, .. } => Destination::KafkaTopic {
                topic: topic.clone(),
            },
            _ => unreachable!("a Kafka channel makes topics only"),
        }
    }

    /// Leaves the topic on the broker (see the module's doc): nothing to do.
    async fn remove(&self, _bridge: &BridgeConfig) -> Result<()> {
        Ok(())
    }
}
