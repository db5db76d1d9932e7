//! How a task looks on the wire: the JSON shape shared by the HTTP API and
//! `backstop tasks show --json`.

use backstop_core::{Event, Task};
use jiff::Timestamp;
use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

/// A task: every field of its ledger row, the payload as JSON when it is JSON.
#[derive(Serialize, ToSchema)]
pub struct TaskView<'a> {
    pub id: String,
    pub kind: &'a str,
    pub key: &'a str,
    #[schema(value_type = String, example = "pending")]
    pub status: &'static str,
    /// `true` for a pending task leased ahead by a dispatcher and not started yet (no attempt
    /// counted; due again by itself at `lease_until`).
    pub held: bool,
    pub attempts: u32,
    pub max_attempts: u32,
    #[schema(value_type = String, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::serialize")]
    pub run_at: Timestamp,
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::option::serialize")]
    pub expires_at: Option<Timestamp>,
    pub last_error: Option<&'a str>,
    pub reason: Option<&'a str>,
    #[schema(value_type = String, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::serialize")]
    pub created_at: Timestamp,
    #[schema(value_type = String, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::serialize")]
    pub updated_at: Timestamp,
    pub lease_owner: Option<&'a str>,
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::option::serialize")]
    pub lease_until: Option<Timestamp>,
    pub epoch: i64,
    pub traceparent: Option<&'a str>,
    /// Its ordering group: the group's tasks run one at a time, in the order their enqueues
    /// committed. Absent for a task without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<&'a str>,
    /// Its place in its group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_seq: Option<i64>,
    /// `true` while it waits behind an earlier open task of its group (still pending, not
    /// due until that task ends; `run_at` applies from then).
    pub parked: bool,
    /// The payload exactly as stored when it is JSON; otherwise a string of its bytes.
    #[schema(value_type = serde_json::Value)]
    pub payload: Box<RawValue>,
    /// The timeline, oldest first (single-task reads only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<&'a [Event]>,
}

impl<'a> TaskView<'a> {
    /// The view of `t`, with its timeline when given.
    pub fn new(t: &'a Task, events: Option<&'a [Event]>) -> Self {
        TaskView {
            id: t.id.to_string(),
            kind: &t.kind,
            key: &t.key,
            status: t.status.as_str(),
            held: t.is_held(),
            attempts: t.attempts,
            max_attempts: t.max_attempts,
            run_at: t.run_at,
            expires_at: t.expires_at,
            last_error: t.last_error.as_deref(),
            reason: t.reason.as_deref(),
            created_at: t.created_at,
            updated_at: t.updated_at,
            lease_owner: t.lease_owner.as_deref(),
            lease_until: t.lease_until,
            epoch: t.epoch,
            traceparent: t.traceparent.as_deref(),
            group: t.group.as_deref(),
            group_seq: t.group_seq,
            parked: t.parked,
            payload: payload_json(&t.payload),
            events,
        }
    }
}

/// Stored payload bytes as JSON: exact when they are JSON, a string otherwise.
pub fn payload_json(bytes: &[u8]) -> Box<RawValue> {
    let exact = std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| RawValue::from_string(s.to_string()).ok());
    exact.unwrap_or_else(|| {
        let text = serde_json::to_string(&String::from_utf8_lossy(bytes)).expect("a string");
        RawValue::from_string(text).expect("a JSON string")
    })
}
