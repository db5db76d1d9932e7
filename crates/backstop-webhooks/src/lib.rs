//! Webhook signing and HTTP push delivery for backstop.
//!
//! [`StandardWebhooks`] signs outbound requests and verifies inbound callbacks with the
//! Standard Webhooks scheme (HMAC-SHA256, timestamp window). [`DeliveryClient`] POSTs one
//! attempt to a target and classifies the answer into an
//! [`AttemptReport`](backstop_core::AttemptReport); it never follows redirects.
//! [`verify`] checks inbound provider callbacks (Standard Webhooks, Stripe, generic
//! HMAC-SHA256, WeChat Pay v3, Alipay RSA2).

mod delivery;
mod standard;
pub mod verify;

pub use delivery::{ClientError, Delivery, DeliveryClient};
pub use standard::{SecretError, StandardWebhooks, VerifyError};

/// A parsed target URL.
pub use reqwest::Url;
