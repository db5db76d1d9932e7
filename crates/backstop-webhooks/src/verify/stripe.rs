//! `stripe`: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]`, HMAC-SHA256 over `{t}.{body}`
//! keyed by the endpoint secret's own bytes (`whsec_…` is not decoded).

use super::headers::required_header;
use super::hex::{decode_hex, tags_equal};
use super::timestamps::{parse_timestamp, within_inclusive};
use super::{Checked, ConfigError, InboundRequest, Rejection, Scheme};
use aws_lc_rs::hmac;

const HEADER: &str = "Stripe-Signature";

pub(super) struct Stripe {
    keys: Vec<hmac::Key>,
    tolerance_secs: u64,
}

impl Stripe {
    pub(super) fn new(secrets: &[String], tolerance_secs: u64) -> Result<Self, ConfigError> {
        Ok(Stripe {
            keys: super::hmac::keys(secrets, Scheme::Stripe, "endpoint secret in `keys`")?,
            tolerance_secs,
        })
    }

    pub(super) fn verify(&self, request: &InboundRequest<'_>) -> Result<Checked, Rejection> {
        let value = required_header(request.headers, HEADER)?;
        let mut timestamp = None;
        let mut signatures = Vec::new();
        for (name, item) in value
            .split(',')
            .filter_map(|entry| entry.trim().split_once('='))
        {
            match name {
                "t" if timestamp.is_none() => timestamp = Some(item),
                "v1" => signatures.push(item),
                // `v0` (test-mode legacy) and unknown schemes are ignored, as Stripe's SDKs do.
                _ => {}
            }
        }
        let timestamp = timestamp.ok_or(Rejection::BadTimestamp { header: HEADER })?;
        let ts = parse_timestamp(timestamp, HEADER)?;
        within_inclusive(request.now, ts, self.tolerance_secs)?;

        let candidates: Vec<Vec<u8>> = signatures.iter().filter_map(|s| decode_hex(s)).collect();
        let matched = self.keys.iter().any(|key| {
            let mut ctx = hmac::Context::with_key(key);
            ctx.update(timestamp.as_bytes());
            ctx.update(b".");
            ctx.update(request.body);
            let expected = ctx.sign();
            candidates
                .iter()
                .any(|candidate| tags_equal(expected.as_ref(), candidate))
        });
        if !matched {
            return Err(Rejection::NoMatchingSignature);
        }
        Ok(Checked {
            payload: request.body.to_vec(),
            event_id: super::key_locator::json_string_at(request.body, "/id"),
        })
    }
}
