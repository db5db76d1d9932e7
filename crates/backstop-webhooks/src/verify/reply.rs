//! What each provider expects back: the success reply and the failure reply.

use super::{Rejection, Scheme};
use http::StatusCode;

/// An HTTP answer to a callback: status, `Content-Type` (none for an empty body) and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: StatusCode,
    /// The `Content-Type`, when there is a body.
    pub content_type: Option<&'static str>,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl Scheme {
    /// The reply that tells the provider the callback was taken (it stops resending):
    ///
    /// - `alipay-rsa2`: 200, `text/plain`, exactly `success` (7 bytes; anything else makes
    ///   Alipay resend);
    /// - every other scheme (WeChat Pay accepts 200 or 204): 204 No Content.
    pub fn success_reply(self) -> Reply {
        match self {
            Scheme::AlipayRsa2 => Reply {
                status: StatusCode::OK,
                content_type: Some("text/plain"),
                body: b"success".to_vec(),
            },
            _ => Reply {
                status: StatusCode::NO_CONTENT,
                content_type: None,
                body: Vec::new(),
            },
        }
    }

    /// The reply for a rejected callback, at [`Rejection::status`] (400 or 401).
    pub fn rejection_reply(self, rejection: &Rejection) -> Reply {
        self.failure_reply(rejection.status(), &rejection.to_string())
    }

    /// A failure reply at `status` (4xx, or 5xx when the server could not record a verified
    /// callback), in the provider's format; the provider resends later:
    ///
    /// - `wechatpay-v3`: `application/json` `{"code":"FAIL","message":"…"}`;
    /// - `alipay-rsa2`: `text/plain` `fail`;
    /// - the others: `application/problem+json` with `type`
    ///   `urn:backstop:problem:unauthorized` (401), `…:bad-request` (400) or
    ///   `…:callback-failed`, `title`, `status` and `detail` = `message`.
    pub fn failure_reply(self, status: StatusCode, message: &str) -> Reply {
        let (content_type, body) = match self {
            Scheme::WechatpayV3 => (
                "application/json",
                serde_json::json!({ "code": "FAIL", "message": message }),
            ),
            Scheme::AlipayRsa2 => {
                return Reply {
                    status,
                    content_type: Some("text/plain"),
                    body: b"fail".to_vec(),
                };
            }
            _ => {
                let name = match status {
                    StatusCode::UNAUTHORIZED => "unauthorized",
                    StatusCode::BAD_REQUEST => "bad-request",
                    _ => "callback-failed",
                };
                (
                    "application/problem+json",
                    serde_json::json!({
                        "type": format!("urn:backstop:problem:{name}"),
                        "title": status.canonical_reason().unwrap_or("Error"),
                        "status": status.as_u16(),
                        "detail": message,
                    }),
                )
            }
        };
        Reply {
            status,
            content_type: Some(content_type),
            body: body.to_string().into_bytes(),
        }
    }
}
