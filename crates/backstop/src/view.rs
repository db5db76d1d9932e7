//! How tasks and timelines look to people and programs: the JSON shape shared by the CLI
//! (and the HTTP API), and the plain-text rendering.

use backstop_core::{Event, Task};
use jiff::Timestamp;
use serde::Serialize;
use std::fmt::Write;

/// A task as JSON: every field of the ledger row, the payload as JSON when it is JSON.
#[derive(Serialize)]
pub struct TaskView<'a> {
    pub id: String,
    pub kind: &'a str,
    pub key: &'a str,
    pub status: &'static str,
    pub attempts: u32,
    pub max_attempts: u32,
    pub run_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub last_error: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub lease_owner: Option<&'a str>,
    pub lease_until: Option<Timestamp>,
    pub epoch: i64,
    pub traceparent: Option<&'a str>,
    /// The payload exactly as stored when it is JSON; otherwise a string of its bytes.
    pub payload: Box<serde_json::value::RawValue>,
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
            payload: payload_json(&t.payload),
            events,
        }
    }
}

fn payload_json(bytes: &[u8]) -> Box<serde_json::value::RawValue> {
    let exact = std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| serde_json::value::RawValue::from_string(s.to_string()).ok());
    exact.unwrap_or_else(|| {
        let text = serde_json::to_string(&String::from_utf8_lossy(bytes)).expect("a string");
        serde_json::value::RawValue::from_string(text).expect("a JSON string")
    })
}

/// Seconds precision is enough for people; JSON keeps full precision.
fn short(t: Timestamp) -> String {
    t.strftime("%Y-%m-%d %H:%M:%S%.3fZ").to_string()
}

/// One line per task, for listings.
pub fn task_line(t: &Task) -> String {
    let mut s = format!(
        "{}  {:<11}  {}/{}  attempts {}/{}",
        t.id,
        t.status.as_str(),
        t.kind,
        t.key,
        t.attempts,
        t.max_attempts
    );
    if let Some(e) = &t.last_error {
        let _ = write!(s, "  last_error: {e}");
    }
    if let Some(r) = &t.reason {
        let _ = write!(s, "  reason: {r}");
    }
    s
}

/// A task and its timeline, for `tasks show`.
pub fn task_detail(t: &Task, events: &[Event]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "task      {}", t.id);
    let _ = writeln!(s, "kind/key  {}/{}", t.kind, t.key);
    let _ = writeln!(s, "status    {}", t.status);
    let _ = writeln!(s, "attempts  {} of {}", t.attempts, t.max_attempts);
    let _ = writeln!(s, "created   {}", short(t.created_at));
    let _ = writeln!(s, "run_at    {}", short(t.run_at));
    if let Some(e) = t.expires_at {
        let _ = writeln!(s, "expires   {}", short(e));
    }
    if let Some(o) = &t.lease_owner {
        let until = t.lease_until.map(short).unwrap_or_default();
        let _ = writeln!(s, "leased    by {o} until {until}");
    }
    if let Some(e) = &t.last_error {
        let _ = writeln!(s, "error     {e}");
    }
    if let Some(r) = &t.reason {
        let _ = writeln!(s, "reason    {r}");
    }
    let _ = writeln!(s, "payload   {}", String::from_utf8_lossy(&t.payload));
    let _ = writeln!(s, "timeline");
    for e in events {
        let _ = write!(s, "  {}  {}", short(e.at), e.kind.as_str());
        if let Some(a) = e.attempt {
            let _ = write!(s, " #{a}");
        }
        match e.outcome {
            Some(o) => {
                let _ = write!(s, "  {o}");
            }
            None if e.kind == backstop_core::EventType::Attempt => {
                let _ = write!(s, "  running");
            }
            None => {}
        }
        if let Some(h) = e.http_status {
            let _ = write!(s, "  HTTP {h}");
        }
        if let Some(d) = e.duration_ms {
            let _ = write!(s, "  {d} ms");
        }
        if let Some(w) = &e.worker {
            let _ = write!(s, "  worker {w}");
        }
        if let Some(a) = &e.actor {
            let _ = write!(s, "  by {a}");
        }
        if let Some(r) = &e.reason {
            let _ = write!(s, "  reason: {r}");
        }
        if let Some(err) = &e.error {
            let _ = write!(s, "  error: {err}");
        }
        let _ = writeln!(s);
    }
    s
}
