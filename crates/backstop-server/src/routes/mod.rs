//! One module per resource, each exposing `router()`.

pub mod entities;
pub mod health;
pub mod hooks;
pub mod kinds;
pub mod leases;
pub mod metrics;
pub mod reconciliations;
pub mod tasks;
