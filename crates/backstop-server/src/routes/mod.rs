//! One module per resource, each exposing `router()`, and the problem responses they share in
//! the OpenAPI document (`problems`).

pub mod bridges;
pub mod entities;
pub mod health;
pub mod hooks;
pub mod kinds;
pub mod leases;
pub mod limits;
pub mod metrics;
pub(crate) mod problems;
pub mod reconciliations;
pub mod schedules;
pub mod tasks;
