//! Kafka, through librdkafka: a consumer group member that commits only what the ledger
//! holds, and an idempotent producer whose delivery report is the confirmation.

pub(crate) mod config;
