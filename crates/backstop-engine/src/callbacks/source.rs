//! A configured inbound source: its name, the kind its callbacks become, how its requests
//! are verified and how large they may be.

use backstop_webhooks::verify::{Scheme, Verifier};
use std::fmt;

/// Largest request body a source accepts unless configured otherwise: 256 KiB (payment
/// notifications are a few KiB; Stripe's largest events stay well under this).
pub const DEFAULT_MAX_CALLBACK_BODY: usize = 256 * 1024;

/// One configured inbound source (`[sources.NAME]`).
pub struct CallbackSource {
    /// The source's name: the `{source}` of its URL.
    pub name: String,
    /// The kind of the tasks its accepted callbacks become (a configured kind).
    pub kind: String,
    /// Checks its requests.
    pub verifier: Verifier,
    /// Largest accepted body, in bytes.
    pub max_body: usize,
}

impl fmt::Debug for CallbackSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackSource")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("scheme", &self.verifier.scheme())
            .field("max_body", &self.max_body)
            .finish()
    }
}

impl CallbackSource {
    /// A source of `kind` checked by `verifier`, with the default body limit.
    pub fn new(name: impl Into<String>, kind: impl Into<String>, verifier: Verifier) -> Self {
        CallbackSource {
            name: name.into(),
            kind: kind.into(),
            verifier,
            max_body: DEFAULT_MAX_CALLBACK_BODY,
        }
    }

    /// The source's scheme.
    pub fn scheme(&self) -> Scheme {
        self.verifier.scheme()
    }
}
