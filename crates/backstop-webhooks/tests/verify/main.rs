//! Inbound callback verification (`backstop_webhooks::verify`) against the published vectors
//! of each scheme, plus the rejections, boundaries, key formats and replies.

mod alipay;
mod common;
mod hmac;
mod standard;
mod stripe;
mod support;
mod wechatpay;
