//! How tasks and timelines look to people and programs: the JSON shape is the HTTP API's
//! (one definition, in `backstop-server`), and the plain-text rendering is here.

pub use backstop_server::task_view::TaskView;

use backstop_core::{Event, Task};
use jiff::Timestamp;
use std::fmt::Write;

/// Seconds precision is enough for people; JSON keeps full precision.
fn short(t: Timestamp) -> String {
    t.strftime("%Y-%m-%d %H:%M:%S%.3fZ").to_string()
}

/// One line per task, for listings.
pub fn task_line(t: &Task) -> String {
    let mut s = format!(
        "{}  {:<11}  {}/{}  attempts {}/{}",
        t.id,
        // Held: leased ahead, not started; listed apart from the attempts running.
        if t.is_held() {
            "held"
        } else if t.parked {
            "parked"
        } else {
            t.status.as_str()
        },
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
    if let Some(g) = &t.group {
        let place = t
            .group_seq
            .map(|n| format!(", place {n}"))
            .unwrap_or_default();
        let parked = if t.parked {
            " (parked behind an earlier open task: `backstop why` names it)"
        } else {
            ""
        };
        let _ = writeln!(s, "group     {g}{place}{parked}");
    }
    if let Some(e) = t.expires_at {
        let _ = writeln!(s, "expires   {}", short(e));
    }
    if let Some(o) = &t.lease_owner {
        let until = t.lease_until.map(short).unwrap_or_default();
        let what = if t.is_held() {
            "held      (leased ahead, not started)"
        } else {
            "leased   "
        };
        let _ = writeln!(s, "{what} by {o} until {until}");
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

#[cfg(test)]
mod tests {
    use super::*;
    use backstop_core::{Status, TaskId};

    fn task(status: Status, owner: Option<&str>) -> Task {
        let t: Timestamp = "2030-01-01T00:00:00Z".parse().unwrap();
        Task {
            id: TaskId::new(),
            kind: "sms.send".into(),
            key: "order-1".into(),
            payload: b"{}".to_vec(),
            status,
            attempts: 0,
            max_attempts: 3,
            run_at: t,
            expires_at: None,
            lease_owner: owner.map(Into::into),
            lease_until: owner.map(|_| t),
            epoch: 1,
            traceparent: None,
            last_error: None,
            reason: None,
            created_at: t,
            updated_at: t,
            group: None,
            group_seq: None,
            parked: false,
        }
    }

    #[test]
    fn listings_show_held_tasks_apart_from_running_ones() {
        let held = task(Status::Pending, Some("w1"));
        assert!(
            task_line(&held).contains("  held  "),
            "{}",
            task_line(&held)
        );
        assert!(task_detail(&held, &[]).contains("held      (leased ahead, not started) by w1"));
        let json = serde_json::to_value(TaskView::new(&held, None)).unwrap();
        assert_eq!(
            (json["status"].as_str(), json["held"].as_bool()),
            (Some("pending"), Some(true))
        );
        let running = task(Status::Running, Some("w1"));
        assert!(task_line(&running).contains("  running  "));
        let json = serde_json::to_value(TaskView::new(&running, None)).unwrap();
        assert_eq!(json["held"].as_bool(), Some(false));
        let pending = task(Status::Pending, None);
        assert!(task_line(&pending).contains("  pending  "));
    }
}
