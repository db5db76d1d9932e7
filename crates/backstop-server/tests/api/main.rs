//! The HTTP API driven over real HTTP on loopback, on a real SQLite ledger: every endpoint
//! and every status code of its contract.

mod auth;
mod checkpoints;
mod connections;
mod enqueue;
mod entities;
mod harness;
mod leases;
mod limits;
mod manage;
mod ops;
mod reconciliations;
