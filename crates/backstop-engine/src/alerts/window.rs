//! Aggregation: the events of one window become one message per sink, with counts and the
//! first few task ids per event and kind, not one message per task.

use super::event::{AlertEvent, AlertName};
use backstop_core::TaskId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Task ids kept per group; the count says how many there were.
pub const FIRST_IDS: usize = 5;

/// The events of one window, grouped by event and kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Window {
    pub groups: Vec<Group>,
}

/// Every occurrence of one event for one kind in a window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub event: AlertName,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub count: u64,
    /// The first few tasks, in the order they happened.
    pub tasks: Vec<TaskId>,
    /// The first occurrence's detail.
    pub detail: String,
}

/// Collects events until the window closes.
#[derive(Default)]
pub struct Collector {
    groups: BTreeMap<(AlertName, Option<String>), Group>,
}

impl Collector {
    /// Adds one event.
    pub fn add(&mut self, e: AlertEvent) {
        let g = self
            .groups
            .entry((e.name, e.kind.clone()))
            .or_insert_with(|| Group {
                event: e.name,
                kind: e.kind,
                count: 0,
                tasks: Vec::new(),
                detail: e.detail,
            });
        g.count += 1;
        if let Some(t) = e.task
            && g.tasks.len() < FIRST_IDS
            && !g.tasks.contains(&t)
        {
            g.tasks.push(t);
        }
    }

    /// Adds a group collected elsewhere (a journal left by a process that is gone).
    pub fn merge(&mut self, g: Group) {
        let into = self
            .groups
            .entry((g.event, g.kind.clone()))
            .or_insert_with(|| Group {
                tasks: Vec::new(),
                count: 0,
                ..g.clone()
            });
        into.count += g.count;
        for t in g.tasks {
            if into.tasks.len() < FIRST_IDS && !into.tasks.contains(&t) {
                into.tasks.push(t);
            }
        }
    }

    /// The groups so far, without closing the window.
    pub fn groups(&self) -> Vec<Group> {
        self.groups.values().cloned().collect()
    }

    /// Whether nothing was collected.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Closes the window: the groups the `wanted` filter keeps, in event then kind order.
    pub fn take(&mut self) -> Window {
        Window {
            groups: std::mem::take(&mut self.groups).into_values().collect(),
        }
    }
}

impl Window {
    /// The groups a sink subscribed to.
    pub fn only(&self, wanted: &[AlertName]) -> Window {
        Window {
            groups: self
                .groups
                .iter()
                .filter(|g| wanted.contains(&g.event))
                .cloned()
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The message in plain text, one line per group.
    pub fn text(&self, source: &str) -> String {
        let mut out = format!("backstop alerts from {source}:");
        for g in &self.groups {
            out.push_str(&format!("\n- {} ×{}", g.event, g.count));
            if let Some(k) = &g.kind {
                out.push_str(&format!(" [{k}]"));
            }
            out.push_str(&format!(": {}", g.detail));
            if !g.tasks.is_empty() {
                let ids: Vec<String> = g.tasks.iter().map(|t| t.to_string()).collect();
                out.push_str(&format!(" (tasks {}", ids.join(", ")));
                if g.count > g.tasks.len() as u64 {
                    out.push_str(", …");
                }
                out.push(')');
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(kind: &str) -> AlertEvent {
        AlertEvent {
            name: AlertName::TaskFailed,
            kind: Some(kind.into()),
            task: Some(TaskId::new()),
            detail: "HTTP 400".into(),
        }
    }

    #[test]
    fn many_events_make_one_group_with_counts_and_the_first_ids() {
        let mut c = Collector::default();
        let mut first = Vec::new();
        for _ in 0..12 {
            let e = failed("sms.send");
            first.push(e.task.unwrap());
            c.add(e);
        }
        c.add(failed("refund.create"));
        let w = c.take();
        assert!(c.is_empty(), "taking empties the window");
        assert_eq!(w.groups.len(), 2);
        let sms = w
            .groups
            .iter()
            .find(|g| g.kind.as_deref() == Some("sms.send"))
            .unwrap();
        assert_eq!(sms.count, 12);
        assert_eq!(sms.tasks, first[..FIRST_IDS]);
        let text = w.text("n1");
        assert!(text.contains("task.failed ×12 [sms.send]"), "{text}");
        assert!(text.contains(", …)"), "{text}");
    }

    #[test]
    fn sinks_see_only_their_events() {
        let mut c = Collector::default();
        c.add(failed("k"));
        c.add(AlertEvent::new(
            AlertName::ReconcilerStalled,
            "no pass for 40s",
        ));
        let w = c.take();
        let only = w.only(&[AlertName::ReconcilerStalled]);
        assert_eq!(only.groups.len(), 1);
        assert_eq!(only.groups[0].event, AlertName::ReconcilerStalled);
    }
}
