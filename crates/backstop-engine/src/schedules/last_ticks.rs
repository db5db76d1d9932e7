//! The state of the last tick of each schedule of a planning batch, where its plan needs it
//! (`overlap` other than `allow`, or a `queue_one` instant waiting): read by key, per kind in
//! batches, guessing that the last tick is the row of the schedule's last planned instant
//! (so it is, unless that instant was compensated or a waiting one ran since); the others are
//! read by id.

use crate::context::Context;
use backstop_core::schedule::{LastTick, Overlap, Progress, Schedule, tick_key};
use backstop_core::store::{GetParams, KeysParams};
use backstop_core::{Status, StoreError, TaskId};
use futures_util::{StreamExt, TryStreamExt, stream};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Keys one read asks for at most.
const KEYS_PER_READ: usize = 500;

/// Reads by id at once, at most, for the last ticks not found by key.
const GETS_AT_ONCE: usize = 16;

/// Whether planning `s` from `progress` looks at its last tick: `allow` never does (unless a
/// `queue_one` instant was left waiting by an earlier definition).
pub(crate) fn needed(s: &Schedule, progress: &Progress) -> Option<TaskId> {
    let needs = s.overlap != Overlap::Allow || progress.waiting.is_some();
    progress.last_tick.filter(|_| needs)
}

/// The last ticks of `batch` (each schedule with its progress) that its plans need, by id. A
/// tick missing here is gone (retention pruned it: long finished).
pub(crate) async fn read(
    ctx: &Context,
    batch: &[(&Schedule, &Progress)],
) -> Result<HashMap<TaskId, LastTick>, StoreError> {
    let mut wanted: HashSet<TaskId> = HashSet::new();
    let mut keys: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (s, progress) in batch {
        let Some(id) = needed(s, progress) else {
            continue;
        };
        wanted.insert(id);
        let guess = progress
            .planned_until
            .and_then(|until| s.times.last_at_or_before(until));
        if let Some(i) = guess {
            keys.entry(s.kind.as_str())
                .or_default()
                .push(tick_key(&s.name, i.at));
        }
    }
    let mut found = HashMap::new();
    for (kind, keys) in keys {
        for chunk in keys.chunks(KEYS_PER_READ) {
            let rows = ctx
                .store
                .tasks_by_keys(KeysParams {
                    kind: kind.to_string(),
                    keys: chunk.to_vec(),
                })
                .await?;
            for t in rows.into_iter().filter(|t| wanted.contains(&t.id)) {
                found.insert(t.id, last(t.id, t.status));
            }
        }
    }
    let rest: Vec<TaskId> = wanted
        .into_iter()
        .filter(|id| !found.contains_key(id))
        .collect();
    let by_id: Vec<Option<LastTick>> = stream::iter(rest)
        .map(|id| async move {
            let t = ctx.store.get(GetParams { id }).await?;
            Ok::<_, StoreError>(t.map(|t| last(id, t.status)))
        })
        .buffer_unordered(GETS_AT_ONCE)
        .try_collect()
        .await?;
    found.extend(by_id.into_iter().flatten().map(|l| (l.id, l)));
    Ok(found)
}

fn last(id: TaskId, status: Status) -> LastTick {
    LastTick { id, status }
}
