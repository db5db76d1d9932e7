//! Kafka, through librdkafka: a consumer group member that commits only what the ledger
//! holds, and an idempotent producer whose delivery report is the confirmation.

mod commit;
pub(crate) mod config;
pub(crate) mod consumer;
mod offsets;
pub(crate) mod producer;
mod rebalance;
mod record;
pub(crate) mod topic;
