//! The consumer's rebalance callback: a revoked partition's pending offset is committed, then
//! its tracking is dropped, so that nothing is committed for it afterwards and its
//! outstanding tokens are ignored.
//!
//! librdkafka calls it from the consumer's poll, that is from inside `next_batch` (or the
//! close when the consumer is dropped), never concurrently with an ack of the same
//! consumer; an ack's commit holds the offsets' lock until the broker has answered, so a
//! revocation that comes while an ack from a dropped call is still committing waits for it:
//! whatever was acknowledged before the revocation is committed before it completes.

use super::commit::commit;
use super::offsets::Offsets;
use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};
use std::sync::{Arc, Mutex, PoisonError};

/// The consumer's context: its offsets, shared with the consumer.
pub(crate) struct Context {
    pub(crate) topic: String,
    pub(crate) group: String,
    pub(crate) offsets: Arc<Mutex<Offsets>>,
}

impl ClientContext for Context {}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(list) => {
                let partitions: Vec<i32> = list
                    .elements_for_topic(&self.topic)
                    .iter()
                    .map(|e| e.partition())
                    .collect();
                let mut offsets = self.offsets.lock().unwrap_or_else(PoisonError::into_inner);
                let open = offsets.open();
                let pending = offsets.revoke(&partitions);
                // Still a member of this generation: the commit is accepted. If it fails,
                // the new owner reads those messages again and the ledger knows them.
                if let Err(e) = commit(consumer, &self.topic, &pending) {
                    tracing::warn!(topic = %self.topic, group = %self.group, ?pending, error = %e, "committing revoked kafka partitions failed");
                }
                tracing::info!(
                    topic = %self.topic,
                    group = %self.group,
                    ?partitions,
                    dropped = open - offsets.open(),
                    "kafka partitions revoked: their unacknowledged messages go to their new owner"
                );
            }
            Rebalance::Assign(list) => {
                let partitions: Vec<i32> = list.elements().iter().map(|e| e.partition()).collect();
                tracing::info!(topic = %self.topic, group = %self.group, ?partitions, "kafka partitions assigned");
            }
            Rebalance::Error(e) => {
                tracing::warn!(topic = %self.topic, group = %self.group, error = %e, "kafka rebalance failed");
            }
        }
    }
}
