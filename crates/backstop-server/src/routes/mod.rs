//! One module per resource, each exposing `router()`.

pub mod health;
pub mod hooks;
pub mod kinds;
pub mod leases;
pub mod metrics;
pub mod tasks;
