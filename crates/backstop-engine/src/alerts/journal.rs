//! The open window, kept in the ledger: each burst of events raised is written (as the beat
//! `alerts:open:<owner>/`) before the window closes, so a process killed with a window still
//! open leaves its events behind, and a live process sends them for it. A window sent clears
//! its journal.

use super::window::{Collector, Group};
use crate::context::Context;
use crate::reconciler::nodes::NODE_PREFIX;
use backstop_core::StoreError;
use backstop_core::store::BeatsParams;
use backstop_core::store::{BeatParams, ForgetBeatsParams};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Journals are beats named this, then the owner and `/` (so one owner's name is never the
/// prefix of another's).
pub const JOURNAL_PREFIX: &str = "alerts:open:";

/// What a journal holds: the window's start and its groups so far.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Journal {
    #[serde(with = "backstop_core::wire_time")]
    pub(crate) window_start: Timestamp,
    pub(crate) groups: Vec<Group>,
}

fn name(owner: &str) -> String {
    format!("{JOURNAL_PREFIX}{owner}/")
}

/// Writes this process's open window (or clears it when empty).
pub(crate) async fn save(
    ctx: &Context,
    start: Timestamp,
    open: &Collector,
) -> Result<(), StoreError> {
    if open.is_empty() {
        return clear(ctx, &ctx.owner).await;
    }
    let journal = Journal {
        window_start: start,
        groups: open.groups(),
    };
    ctx.store
        .beat(BeatParams {
            name: name(&ctx.owner),
            owner: ctx.owner.to_string(),
            at: ctx.clock.now(),
            detail: serde_json::to_string(&journal).expect("plain data"),
        })
        .await
}

/// Removes `owner`'s journal.
pub(crate) async fn clear(ctx: &Context, owner: &str) -> Result<(), StoreError> {
    ctx.store
        .forget_beats(ForgetBeatsParams {
            prefix: name(owner),
            before: Timestamp::MAX,
        })
        .await
        .map(|_| ())
}

/// The journals left by processes that are gone (no node beat within `3 × node_beat`), with
/// their owners.
pub(crate) async fn orphans(
    ctx: &Context,
    node_beat: Duration,
) -> Result<Vec<(String, Journal)>, StoreError> {
    let journals = ctx
        .store
        .beats(BeatsParams {
            prefix: JOURNAL_PREFIX.to_string(),
        })
        .await?;
    if journals.is_empty() {
        return Ok(Vec::new());
    }
    let every = SignedDuration::try_from(node_beat).unwrap_or(SignedDuration::MAX);
    let fresh = ctx.clock.now() - every.saturating_mul(3);
    let alive: Vec<String> = ctx
        .store
        .beats(BeatsParams {
            prefix: NODE_PREFIX.to_string(),
        })
        .await?
        .into_iter()
        .filter(|b| b.at >= fresh)
        .map(|b| b.owner)
        .collect();
    Ok(journals
        .into_iter()
        .filter(|j| *j.owner != *ctx.owner && !alive.contains(&j.owner))
        .filter_map(|j| {
            let journal = serde_json::from_str::<Journal>(&j.detail)
                .inspect_err(|e| tracing::error!(journal = %j.name, error = %e, "unreadable alert journal; left in place"))
                .ok()?;
            Some((j.owner, journal))
        })
        .collect())
}
