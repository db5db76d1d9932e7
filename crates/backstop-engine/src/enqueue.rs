//! From a caller's request to a [`NewTask`]: validation and the kind's defaults.

use crate::context::{Context, Delivery};
use backstop_core::clock::add;
use backstop_core::group::{self, BadGroup};
use backstop_core::limit::BadKey;
use backstop_core::store::{EnqueueParams, EnqueueResult};
use backstop_core::validate::{self, InvalidInput};
use backstop_core::{Intake, KindConfig, NewTask, StoreError, TaskId};
use jiff::Timestamp;
use std::collections::HashMap;
use std::time::Duration;

/// One task to enqueue, as a caller describes it.
#[derive(Clone, Debug, Default)]
pub struct EnqueueRequest {
    pub kind: String,
    pub key: String,
    /// JSON bytes, kept exactly.
    pub payload: Vec<u8>,
    /// Run no earlier than this long from now.
    pub delay: Option<Duration>,
    /// Run no earlier than this instant (wins over `delay`).
    pub run_at: Option<Timestamp>,
    /// Business validity: never run after this instant.
    pub expires_at: Option<Timestamp>,
    /// Business validity relative to now (used when `expires_at` is not given).
    pub expires_in: Option<Duration>,
    /// Overrides the kind's attempt budget.
    pub max_attempts: Option<u32>,
    /// W3C trace context to carry to every attempt.
    pub traceparent: Option<String>,
    /// The ordering group ([`backstop_core::group`]); wins over the group the kind's
    /// `ordering` pointer reads from the payload.
    pub group: Option<String>,
}

/// Why an enqueue was refused.
#[derive(Debug, thiserror::Error)]
pub enum EnqueueError {
    #[error("unknown kind {0:?} (configured kinds: {1})")]
    UnknownKind(String, String),
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    /// The group given, or the one the kind's pointer reads, cannot be used.
    #[error("group: {0}")]
    Group(#[from] BadGroup),
    /// The payload lacks the key of the kind's concurrency limit, or holds one that cannot be
    /// used.
    #[error("limit key: {0}")]
    LimitKey(#[from] BadKey),
    #[error("expires_at {expires_at} is not after run_at {run_at}: the task could never run")]
    ExpiresBeforeRun {
        run_at: Timestamp,
        expires_at: Timestamp,
    },
    #[error("task {kind}/{key} already exists with a different payload (id {existing})")]
    Conflict {
        kind: String,
        key: String,
        existing: TaskId,
    },
    /// One request of a batch was refused; nothing of the batch was written.
    #[error("item {index}: {error}")]
    Item {
        index: usize,
        error: Box<EnqueueError>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The accepted task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enqueued {
    pub id: TaskId,
    /// False when the same `(kind, key)` and payload already existed.
    pub created: bool,
}

/// Validates a request against the configured kinds and fills in their defaults.
pub fn prepare(
    kinds: &HashMap<String, KindConfig>,
    r: EnqueueRequest,
    now: Timestamp,
    max_payload: usize,
) -> Result<NewTask, EnqueueError> {
    validate::kind(&r.kind)?;
    validate::key(&r.key)?;
    let Some(kind) = kinds.get(&r.kind) else {
        let names = crate::context::configured_names(kinds);
        return Err(EnqueueError::UnknownKind(r.kind, names));
    };
    validate::json_payload(&r.payload, max_payload)?;
    let max_attempts = r.max_attempts.unwrap_or(kind.max_attempts);
    validate::max_attempts(max_attempts)?;
    let run_at = r
        .run_at
        .or_else(|| r.delay.map(|d| add(now, d)))
        .unwrap_or(now);
    let expires_at = r
        .expires_at
        .or_else(|| r.expires_in.or(kind.expires_in).map(|d| add(now, d)));
    if let Some(expires_at) = expires_at
        && expires_at <= run_at
    {
        return Err(EnqueueError::ExpiresBeforeRun { run_at, expires_at });
    }
    let group = match r.group {
        Some(g) => {
            group::check(&g)?;
            Some(g)
        }
        None => payload_group(kind, &r.payload)?,
    };
    limit_key(kind, &r.payload)?;
    Ok(NewTask {
        id: TaskId::new(),
        kind: r.kind,
        key: r.key,
        payload: r.payload,
        max_attempts,
        run_at,
        expires_at,
        traceparent: r.traceparent,
        intake: Default::default(),
        origin: None,
        group,
    })
}

/// The group the kind's `ordering` pointer reads from a payload; `None` for a kind that does
/// not order by payload. The payload was checked to be JSON before.
fn payload_group(kind: &KindConfig, payload: &[u8]) -> Result<Option<String>, BadGroup> {
    let Some(pointer) = kind.ordering.as_ref().and_then(|o| o.group.as_deref()) else {
        return Ok(None);
    };
    let value: serde_json::Value = serde_json::from_slice(payload).unwrap_or_default();
    group::from_payload(&value, pointer).map(Some)
}

/// Checks the keys the kind's concurrency and rate limits read from a payload (checked to be
/// JSON before); a claim reads them again, so they are not kept.
fn limit_key(kind: &KindConfig, payload: &[u8]) -> Result<(), BadKey> {
    if kind.concurrency_limit.is_none() && kind.rate_limit.is_none() {
        return Ok(());
    }
    let value: serde_json::Value = serde_json::from_slice(payload).unwrap_or_default();
    if let Some(limit) = &kind.concurrency_limit {
        limit.check(&value)?;
    }
    if let Some(limit) = &kind.rate_limit {
        limit.check(&value)?;
    }
    Ok(())
}

/// Does for tasks that did not go through [`prepare`] (schedule ticks) what it does: gives a
/// task of an ordered kind without a group the group its payload names, and checks the key of
/// a limited kind; a task whose payload names neither as its kind needs becomes a dead letter
/// saying why, rather than running out of order or outside its limit.
fn group_by_payload(ctx: &Context, tasks: &mut [NewTask]) {
    for t in tasks.iter_mut() {
        if !matches!(t.intake, Intake::Run) {
            continue;
        }
        let Some(k) = ctx.kinds.configs().get(&t.kind) else {
            continue;
        };
        let checked = match t.group {
            Some(_) => Ok(()),
            None => payload_group(k, &t.payload)
                .map(|g| t.group = g)
                .map_err(|e| format!("group: {e}")),
        }
        .and_then(|()| limit_key(k, &t.payload).map_err(|e| format!("limit key: {e}")));
        if let Err(reason) = checked {
            t.intake = Intake::Failed { reason };
        }
    }
}

/// Enqueues tasks in one transaction, waking what serves their kinds. Invalid requests fail
/// the whole call before anything is written; a conflict fails only its own item.
pub(crate) async fn enqueue_many(
    ctx: &Context,
    max_payload: usize,
    rs: Vec<EnqueueRequest>,
) -> Result<Vec<Result<Enqueued, EnqueueError>>, EnqueueError> {
    let now = ctx.clock.now();
    let batch = rs.len() > 1;
    let tasks = rs
        .into_iter()
        .enumerate()
        .map(|(index, r)| {
            prepare(ctx.kinds.configs(), r, now, max_payload).map_err(|error| match batch {
                true => EnqueueError::Item {
                    index,
                    error: Box::new(error),
                },
                false => error,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let keys: Vec<(String, String)> = tasks
        .iter()
        .map(|t| (t.kind.clone(), t.key.clone()))
        .collect();
    let results = enqueue_prepared(ctx, tasks, now).await?;
    let mut out = Vec::with_capacity(results.len());
    for (r, (kind, key)) in results.into_iter().zip(keys) {
        out.push(match r {
            EnqueueResult::Created(id) => Ok(Enqueued { id, created: true }),
            EnqueueResult::Existing(id) => Ok(Enqueued { id, created: false }),
            EnqueueResult::Conflict(existing) => Err(EnqueueError::Conflict {
                kind,
                key,
                existing,
            }),
        });
    }
    Ok(out)
}

/// [`enqueue_prepared`] for tasks built without [`prepare`] (schedule ticks): their group and
/// limit key are read from their payloads first.
pub(crate) async fn enqueue_tasks(
    ctx: &Context,
    mut tasks: Vec<NewTask>,
    now: Timestamp,
) -> Result<Vec<EnqueueResult>, StoreError> {
    group_by_payload(ctx, &mut tasks);
    enqueue_prepared(ctx, tasks, now).await
}

/// Writes tasks in one transaction, waking what serves their kinds and counting the new ones:
/// the one way into the ledger for every source. Each went through [`prepare`] (the API,
/// bridges) or [`enqueue_tasks`].
pub(crate) async fn enqueue_prepared(
    ctx: &Context,
    tasks: Vec<NewTask>,
    now: Timestamp,
) -> Result<Vec<EnqueueResult>, StoreError> {
    let kinds: Vec<(String, bool)> = tasks
        .iter()
        .map(|t| (t.kind.clone(), matches!(t.intake, Intake::Run)))
        .collect();
    let results = ctx.store.enqueue(EnqueueParams { tasks, now }).await?;
    for (r, (kind, runs)) in results.iter().zip(kinds) {
        if let Some(k) = ctx.kinds.get(&kind) {
            if runs {
                match k.delivery {
                    Delivery::Dispatched => k.wake.notify_one(),
                    Delivery::Pulled => ctx.kinds.pull_wake.notify_waiters(),
                }
            }
            if matches!(r, EnqueueResult::Created(_)) {
                k.metrics.enqueued.increment(1);
            }
        }
    }
    Ok(results)
}
