//! `standard-webhooks`: reuses the outgoing signer's verification ([`crate::StandardWebhooks`])
//! once per configured secret.

use super::headers::header;
use super::{Checked, ConfigError, InboundRequest, Rejection, Scheme};
use crate::{StandardWebhooks, VerifyError};

pub(super) struct Standard {
    keys: Vec<StandardWebhooks>,
    tolerance_secs: u64,
}

impl Standard {
    pub(super) fn new(secrets: &[String], tolerance_secs: u64) -> Result<Self, ConfigError> {
        if secrets.is_empty() {
            return Err(ConfigError::NoKeys {
                scheme: Scheme::StandardWebhooks,
                what: "`whsec_` secret in `keys`",
            });
        }
        let keys = secrets
            .iter()
            .enumerate()
            .map(|(index, secret)| {
                StandardWebhooks::from_secret(secret)
                    .map_err(|source| ConfigError::Secret { index, source })
            })
            .collect::<Result<_, _>>()?;
        Ok(Standard {
            keys,
            tolerance_secs,
        })
    }

    pub(super) fn verify(&self, request: &InboundRequest<'_>) -> Result<Checked, Rejection> {
        let id = header(request.headers, "webhook-id")?;
        let timestamp = header(request.headers, "webhook-timestamp")?;
        let signature = header(request.headers, "webhook-signature")?;
        let now = request.now.as_second();
        let tolerance = i64::try_from(self.tolerance_secs).unwrap_or(i64::MAX);
        for key in &self.keys {
            match key.verify(id, timestamp, signature, request.body, now, tolerance) {
                Ok(()) => {
                    return Ok(Checked {
                        payload: request.body.to_vec(),
                        event_id: id.map(str::to_string),
                    });
                }
                // Another secret (key rotation) may still match.
                Err(VerifyError::NoMatchingSignature) => continue,
                Err(other) => return Err(rejection(other)),
            }
        }
        Err(Rejection::NoMatchingSignature)
    }
}

fn rejection(error: VerifyError) -> Rejection {
    match error {
        VerifyError::MissingHeader(name) => Rejection::MissingHeader(name.to_string()),
        VerifyError::InvalidTimestamp => Rejection::BadTimestamp {
            header: "webhook-timestamp",
        },
        VerifyError::TimestampOutOfTolerance {
            skew_secs,
            tolerance_secs,
        } => Rejection::OutsideTolerance {
            skew_secs,
            tolerance_secs: tolerance_secs.max(0).unsigned_abs(),
        },
        VerifyError::NoMatchingSignature => Rejection::NoMatchingSignature,
    }
}
