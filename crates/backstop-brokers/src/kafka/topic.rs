//! Deleting a topic (with every record it holds), for benches and drills that make their
//! own: the admin API's `DeleteTopics`.
//!
//! Against Tansu 0.6 (the test broker), a delete makes it answer other consumers' fetches
//! with a leader-change tag and no topic id; librdkafka 2.12, fetching by topic name (Fetch
//! v12, as Tansu's metadata has no topic ids), looks that up with a null name and crashes.
//! Real Kafka names topics by id from Fetch v13 on, where librdkafka looks them up by id.

use super::config::{CONNECT_TIMEOUT, client_config};
use crate::BrokerError;
use backstop_core::broker::BrokerUrl;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// Deletes `topic`; one already gone is not an error.
pub(crate) async fn delete(url: &BrokerUrl, topic: &str) -> Result<(), BrokerError> {
    let config = client_config(url).map_err(|e| BrokerError::Config(format!("{url}: {e}")))?;
    let admin: AdminClient<DefaultClientContext> = config
        .create()
        .map_err(|e| BrokerError::Config(format!("kafka admin client for {url}: {e}")))?;
    let options = AdminOptions::new().request_timeout(Some(CONNECT_TIMEOUT));
    let context = || format!("deleting topic {topic:?} on {url}");
    let results = admin
        .delete_topics(&[topic], &options)
        .await
        .map_err(|e| BrokerError::connection(context(), e))?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
            Err((_, code)) => {
                return Err(BrokerError::connection(
                    context(),
                    KafkaError::AdminOp(code),
                ));
            }
        }
    }
    Ok(())
}
