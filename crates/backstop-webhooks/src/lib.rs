//! Webhook signing and HTTP push delivery for backstop.
//!
//! [`StandardWebhooks`] signs outbound requests and verifies inbound callbacks with the
//! Standard Webhooks scheme (HMAC-SHA256, timestamp window). [`DeliveryClient`] POSTs one
//! attempt to a target and classifies the answer into an
//! [`AttemptReport`](backstop_core::AttemptReport); it never follows redirects.

mod delivery;
mod standard;

pub use delivery::{ClientError, Delivery, DeliveryClient};
pub use standard::{SecretError, StandardWebhooks, VerifyError};

/// A parsed target URL.
pub use reqwest::Url;
