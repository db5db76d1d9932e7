//! The task a tick is: its payload, its origin, and its kind's attempt budget and validity.

use crate::context::Context;
use backstop_core::schedule::{PlannedTick, Schedule, TickCause, rfc3339_seconds, tick_payload};
use backstop_core::{Intake, NewTask, TaskId};
use jiff::Timestamp;

/// The task of one planned tick, with its kind's defaults.
pub(crate) fn tick_task(ctx: &Context, s: &Schedule, t: &PlannedTick) -> NewTask {
    let payload = tick_payload(
        &s.payload,
        t.instant.at,
        TickCause::Planned {
            shifted: t.instant.shifted,
        },
    );
    let origin = serde_json::json!({
        "schedule": s.name,
        "instant": rfc3339_seconds(t.instant.at),
    });
    new_tick(
        ctx,
        s,
        t.key.clone(),
        payload,
        t.run_at,
        t.compensated.clone(),
        origin,
    )
}

/// A tick's task: the kind's attempt budget and validity, and the intake its fate says.
pub(crate) fn new_tick(
    ctx: &Context,
    s: &Schedule,
    key: String,
    payload: Vec<u8>,
    run_at: Timestamp,
    compensated: Option<String>,
    origin: serde_json::Value,
) -> NewTask {
    let kind = ctx.kinds.get(&s.kind).map(|k| &k.config);
    NewTask {
        id: TaskId::new(),
        kind: s.kind.clone(),
        key,
        payload,
        max_attempts: kind.map_or(1, |k| k.max_attempts),
        run_at,
        expires_at: kind
            .and_then(|k| k.expires_in)
            .map(|d| backstop_core::clock::add(run_at, d)),
        traceparent: None,
        intake: match compensated {
            None => Intake::Run,
            Some(reason) => Intake::Compensated { reason },
        },
        origin: Some(origin.to_string()),
        group: None,
    }
}
