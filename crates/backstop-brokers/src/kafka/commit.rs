//! Committing worked-out offsets, synchronously: the call returns when the broker has them.

use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::{Offset, TopicPartitionList};

/// Commits `offsets` (partition, next offset to read) of `topic`, waiting for the broker.
pub(crate) fn commit<C, K>(consumer: &K, topic: &str, offsets: &[(i32, i64)]) -> KafkaResult<()>
where
    C: ConsumerContext,
    K: Consumer<C>,
{
    if offsets.is_empty() {
        return Ok(());
    }
    let mut list = TopicPartitionList::with_capacity(offsets.len());
    for &(partition, offset) in offsets {
        list.add_partition_offset(topic, partition, Offset::Offset(offset))?;
    }
    consumer.commit(&list, CommitMode::Sync)
}

/// A commit refused because the group is rebalancing: the offsets stay pending and go with
/// the next commit or with their partition's revocation, which the rebalance brings.
pub(crate) fn is_rebalancing(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::RebalanceInProgress
                | RDKafkaErrorCode::IllegalGeneration
                | RDKafkaErrorCode::UnknownMemberId
        )
    )
}
