//! The window of ledger tasks a statement is held against: given, or taken from the
//! statement's own record times.

use crate::run::{Options, ReconcileError};
use backstop_core::{duration::format_duration, wire_time};
use jiff::Timestamp;
use serde::Serialize;
use std::time::Duration;

/// The window of ledger tasks the statement is held against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    /// Succeeded tasks that finished at or after this are expected in the statement (no
    /// lower bound when absent).
    #[serde(with = "wire_time::option")]
    pub since: Option<Timestamp>,
    /// …and at or before this: the statement's end.
    #[serde(with = "wire_time")]
    pub until: Timestamp,
    /// Where `since` came from: `given`, `statement` (its earliest record time) or `none`.
    pub since_from: &'static str,
    /// Where `until` came from: `given`, `statement` (its latest record time) or `now` (the
    /// statement has no times).
    pub until_from: &'static str,
    /// The grace period, as written (`15m`).
    pub grace: String,
    /// Anything after this is within grace: `until` minus `grace`.
    #[serde(with = "wire_time")]
    pub grace_cutoff: Timestamp,
}

impl Window {
    /// The window from the options, falling back on the statement's earliest and latest
    /// record times, and on `now` for the end of a statement without times.
    pub(crate) fn resolve(
        opts: &Options,
        first_at: Option<Timestamp>,
        last_at: Option<Timestamp>,
    ) -> Result<Window, ReconcileError> {
        let (since, since_from) = match (opts.since, first_at) {
            (Some(s), _) => (Some(s), "given"),
            (None, Some(f)) => (Some(f), "statement"),
            (None, None) => (None, "none"),
        };
        let (until, until_from) = match (opts.until, last_at) {
            (Some(u), _) => (u, "given"),
            (None, Some(l)) => (l, "statement"),
            (None, None) => (opts.now, "now"),
        };
        if let Some(s) = since
            && s > until
        {
            return Err(ReconcileError::Window(format!(
                "since {s} ({since_from}) is after until {until} ({until_from})"
            )));
        }
        Ok(Window {
            since,
            until,
            since_from,
            until_from,
            grace: String::new(),
            grace_cutoff: until,
        })
    }

    /// With the grace period and its cutoff filled in.
    pub(crate) fn with_grace(mut self, grace: Duration, cutoff: Timestamp) -> Window {
        self.grace = format_duration(grace);
        self.grace_cutoff = cutoff;
        self
    }
}
