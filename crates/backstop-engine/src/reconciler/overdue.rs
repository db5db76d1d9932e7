//! Why overdue work is not running: a pure judgement from the backlog, the live processes'
//! beats and the kind's configuration, so that `backstop doctor` and alerts can say it in
//! plain words.

use super::nodes::NodeBeat;
use backstop_core::store::KindBacklog;
use backstop_core::{KindConfig, Target, TaskId};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The reason overdue tasks of a kind are not running.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Why {
    /// The kind is paused: in the configuration, by hand, by its breaker or a `Retry-After`.
    Paused,
    /// No process configures this kind (a typo in an outbox insert, or a kind removed from
    /// the configuration while tasks were pending).
    UnknownKind,
    /// No live process dispatches this kind (push and in-process kinds).
    NoDispatcher,
    /// No worker has asked to lease this kind recently (pull kinds).
    NoPullWorker,
    /// Every slot is taken: as many tasks run as the live processes allow at once.
    ConcurrencyFull { running: u64, capacity: u64 },
    /// Dispatchers are alive and have room, yet due work waits: they are behind (slow
    /// claims, a slow database, a saturated machine).
    Behind { running: u64, capacity: u64 },
}

impl Why {
    /// The reason in plain words.
    pub fn explain(&self) -> String {
        match self {
            Why::Paused => {
                "the kind is paused (in its configuration, by hand, by its breaker or a Retry-After; `backstop kinds show` says which)".into()
            }
            Why::UnknownKind => "no backstop process configures this kind".into(),
            Why::NoDispatcher => "no live backstop process dispatches this kind".into(),
            Why::NoPullWorker => "no worker has leased this kind recently".into(),
            Why::ConcurrencyFull { running, capacity } => {
                format!("the concurrency limit is full ({running} running of {capacity} allowed)")
            }
            Why::Behind { running, capacity } => {
                format!("the dispatchers are behind ({running} running of {capacity} allowed)")
            }
        }
    }
}

/// Overdue work of one kind and why it waits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overdue {
    pub kind: String,
    /// Pending tasks whose `run_at` is older than the threshold.
    pub count: u64,
    #[serde(with = "backstop_core::wire_time::option")]
    pub oldest_run_at: Option<Timestamp>,
    pub why: Why,
    /// A few of the tasks, oldest first.
    pub sample: Vec<TaskId>,
}

/// Judges every kind with overdue work. `pull_fresh_since`: a pull worker counts as alive
/// when it asked for a lease after this.
pub fn judge(
    backlog: &[KindBacklog],
    nodes: &[NodeBeat],
    configs: &HashMap<String, KindConfig>,
    pull_fresh_since: Timestamp,
) -> Vec<Overdue> {
    backlog
        .iter()
        .filter(|b| b.overdue > 0)
        .map(|b| Overdue {
            kind: b.kind.clone(),
            count: b.overdue,
            oldest_run_at: b.oldest_run_at,
            why: why(b, nodes, configs, pull_fresh_since),
            sample: b.overdue_sample.clone(),
        })
        .collect()
}

fn why(
    b: &KindBacklog,
    nodes: &[NodeBeat],
    configs: &HashMap<String, KindConfig>,
    pull_fresh_since: Timestamp,
) -> Why {
    let serving: Vec<_> = nodes.iter().filter_map(|n| n.kinds.get(&b.kind)).collect();
    let known = configs.get(&b.kind);
    if known.is_none() && serving.is_empty() {
        return Why::UnknownKind;
    }
    let paused = match serving.is_empty() {
        true => known.is_some_and(|k| k.paused),
        false => serving.iter().all(|k| k.paused),
    };
    if paused {
        return Why::Paused;
    }
    let pull = match serving.first() {
        Some(k) => k.pull,
        None => known.is_some_and(|k| k.target == Target::Pull),
    };
    if pull {
        let fresh = nodes
            .iter()
            .filter_map(|n| n.pulled.get(&b.kind))
            .any(|at| *at >= pull_fresh_since);
        if !fresh {
            return Why::NoPullWorker;
        }
    } else if serving.is_empty() {
        return Why::NoDispatcher;
    }
    let capacity: u64 = serving
        .iter()
        .filter(|k| !k.paused)
        .map(|k| k.concurrency as u64)
        .sum();
    if !pull && b.running >= capacity {
        Why::ConcurrencyFull {
            running: b.running,
            capacity,
        }
    } else {
        Why::Behind {
            running: b.running,
            capacity,
        }
    }
}

#[cfg(test)]
#[path = "overdue_tests.rs"]
mod tests;
