//! A scenario's verdict, from the client's acknowledgements, the target's delivery log (read
//! back from disk) and the ledger's word on what was not delivered.

use crate::target::Delivery;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// What the ledger says of an acknowledged task that the target never received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LedgerStatus {
    /// `pending` or `running`: still on its way.
    Unfinished(String),
    /// `failed` or `compensated`: ended without a delivery, with a reason.
    Ended(String),
    /// `succeeded`, though the target has no record of it.
    Succeeded,
    /// The ledger does not know the id.
    Absent,
    /// The ledger could not be asked.
    Unknown(String),
}

/// One scenario's line in the table.
#[derive(Clone, Debug, Default)]
pub struct Row {
    /// Tasks the client got a 2xx for.
    pub acknowledged: usize,
    /// Acknowledged tasks the target received (a 2xx answer logged).
    pub delivered: usize,
    /// Acknowledged, never delivered, and not ended in a status that explains it.
    pub lost: usize,
    /// Business keys delivered under two or more task ids (idempotency keys).
    pub duplicated: usize,
    /// Extra deliveries under the same task id (allowed: at least once).
    pub redelivered: usize,
    /// Acknowledged and still pending or running at the recovery deadline.
    pub stuck: usize,
    /// Acknowledged and ended `failed` or `compensated` without a delivery.
    pub ended: usize,
    /// Keys the client never got acknowledged before its deadline.
    pub unacknowledged: usize,
    /// From the end of the last fault to the last delivery (redeliveries included) of a task
    /// acknowledged before it: how long the backlog and the work the last fault stranded took
    /// to clear (0 when nothing was left to deliver).
    pub recovery: Option<Duration>,
    /// Examples of what went wrong, for the report under the table.
    pub examples: Vec<String>,
}

impl Row {
    /// Whether this row fails the suite.
    pub fn failed(&self) -> bool {
        self.lost > 0 || self.stuck > 0 || self.duplicated > 0 || self.unacknowledged > 0
    }
}

/// Judges a scenario. `acked` is key → task id, `acked_at` key → when (Unix ms); `ledger` has the status of every acknowledged
/// task the target never received; `last_fault_ms` is when the last fault ended.
pub fn judge(
    acked: &HashMap<String, String>,
    acked_at: &HashMap<String, u64>,
    unacknowledged: usize,
    log: &[Delivery],
    ledger: &HashMap<String, LedgerStatus>,
    last_fault_ms: u64,
) -> Row {
    let mut row = Row {
        acknowledged: acked.len(),
        unacknowledged,
        ..Row::default()
    };
    // Per key: the ids delivered with a 2xx, and when the key was last delivered.
    let mut ids: HashMap<&str, HashSet<&str>> = HashMap::new();
    let mut last: HashMap<&str, u64> = HashMap::new();
    let mut ok = 0usize;
    for d in log.iter().filter(|d| (200..300).contains(&d.status)) {
        ok += 1;
        ids.entry(&d.key).or_default().insert(&d.id);
        let at = last.entry(&d.key).or_insert(d.at_ms);
        *at = (*at).max(d.at_ms);
    }
    let pairs: usize = ids.values().map(HashSet::len).sum();
    row.redelivered = ok - pairs;
    for (key, seen) in &ids {
        let foreign = acked
            .get(*key)
            .is_some_and(|id| !seen.contains(id.as_str()));
        if seen.len() > 1 || foreign {
            row.duplicated += 1;
            let mut list: Vec<&&str> = seen.iter().collect();
            list.sort();
            row.examples.push(format!(
                "duplicated: {key} delivered under {list:?} (acknowledged as {:?})",
                acked.get(*key)
            ));
        }
    }
    for (key, id) in acked {
        if ids.contains_key(key.as_str()) {
            row.delivered += 1;
            continue;
        }
        let status = ledger
            .get(id)
            .cloned()
            .unwrap_or(LedgerStatus::Unknown("not asked".into()));
        match &status {
            LedgerStatus::Unfinished(_) => row.stuck += 1,
            LedgerStatus::Ended(_) => row.ended += 1,
            _ => row.lost += 1,
        }
        if !matches!(status, LedgerStatus::Ended(_)) || row.examples.len() < 5 {
            row.examples
                .push(format!("undelivered: {key} ({id}): ledger says {status:?}"));
        }
    }
    let backlog_cleared = last
        .iter()
        .filter(|(key, _)| acked_at.get(**key).is_some_and(|at| *at <= last_fault_ms))
        .map(|(_, at)| *at)
        .max();
    row.recovery = Some(Duration::from_millis(
        backlog_cleared.unwrap_or(0).saturating_sub(last_fault_ms),
    ));
    row.examples.truncate(10);
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(key: &str, id: &str, at_ms: u64, status: u16) -> Delivery {
        Delivery {
            at_ms,
            id: id.into(),
            key: key.into(),
            attempt: 1,
            status,
        }
    }

    fn at(pairs: &[(&str, u64)]) -> HashMap<String, u64> {
        pairs.iter().map(|(k, t)| (k.to_string(), *t)).collect()
    }

    fn acked(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, i)| (k.to_string(), i.to_string()))
            .collect()
    }

    #[test]
    fn a_redelivery_under_the_same_id_is_counted_not_failed() {
        let log = [
            d("a", "1", 10, 200),
            d("a", "1", 20, 200),
            d("b", "2", 30, 200),
        ];
        let row = judge(
            &acked(&[("a", "1"), ("b", "2")]),
            &at(&[("a", 1), ("b", 2)]),
            0,
            &log,
            &HashMap::new(),
            5,
        );
        assert_eq!((row.delivered, row.redelivered, row.duplicated), (2, 1, 0));
        assert_eq!(row.recovery, Some(Duration::from_millis(25)));
        assert!(!row.failed());
    }

    #[test]
    fn recovery_counts_only_work_acknowledged_before_the_last_fault() {
        // a was acknowledged before the fault at 100 and delivered at 400; b came after it.
        let log = [d("a", "1", 400, 200), d("b", "2", 900, 200)];
        let ids = acked(&[("a", "1"), ("b", "2")]);
        let row = judge(
            &ids,
            &at(&[("a", 50), ("b", 800)]),
            0,
            &log,
            &HashMap::new(),
            100,
        );
        assert_eq!(row.recovery, Some(Duration::from_millis(300)));
    }

    #[test]
    fn a_key_under_a_second_id_is_a_duplicate() {
        let log = [d("a", "1", 10, 200), d("a", "9", 20, 200)];
        let row = judge(&acked(&[("a", "1")]), &at(&[]), 0, &log, &HashMap::new(), 0);
        assert_eq!(row.duplicated, 1);
        assert!(row.failed());
    }

    #[test]
    fn undelivered_tasks_are_lost_stuck_or_explained_by_the_ledger() {
        // A 503 is not a delivery.
        let log = [d("a", "1", 10, 503)];
        let ledger: HashMap<String, LedgerStatus> = [
            ("1".to_string(), LedgerStatus::Succeeded),
            ("2".to_string(), LedgerStatus::Unfinished("pending".into())),
            ("3".to_string(), LedgerStatus::Ended("failed".into())),
        ]
        .into();
        let row = judge(
            &acked(&[("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")]),
            &at(&[]),
            0,
            &log,
            &ledger,
            0,
        );
        assert_eq!((row.lost, row.stuck, row.ended), (2, 1, 1));
        assert!(row.failed());
    }
}
