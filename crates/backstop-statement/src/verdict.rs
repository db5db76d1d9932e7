//! The one-word answer of a reconciliation.

use serde::Serialize;
use std::fmt;

/// What a reconciliation concludes, from worst to best.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// The statement cannot be trusted whole: it has unreadable rows, or it is shorter (or
    /// longer) than its declared count, or its amounts do not add up to its declared total.
    /// Breaks found are still listed.
    Incomplete,
    /// At least one real break.
    Breaks,
    /// No break, but items still within the grace window: run again later.
    ReconciledWithPending,
    /// Every record matches a task and every succeeded task in the window has its record.
    Reconciled,
}

impl Verdict {
    /// Decides from what was found: `incomplete` wins over `breaks`, which win over
    /// `pending`.
    pub fn decide(incomplete: bool, breaks: u64, pending: u64) -> Verdict {
        if incomplete {
            Verdict::Incomplete
        } else if breaks > 0 {
            Verdict::Breaks
        } else if pending > 0 {
            Verdict::ReconciledWithPending
        } else {
            Verdict::Reconciled
        }
    }

    /// The upper-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Incomplete => "INCOMPLETE",
            Verdict::Breaks => "BREAKS",
            Verdict::ReconciledWithPending => "RECONCILED_WITH_PENDING",
            Verdict::Reconciled => "RECONCILED",
        }
    }

    /// Whether the two sides fully agree (`RECONCILED`, or `RECONCILED_WITH_PENDING`).
    pub fn is_reconciled(self) -> bool {
        matches!(self, Verdict::Reconciled | Verdict::ReconciledWithPending)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence() {
        assert_eq!(Verdict::decide(true, 5, 5), Verdict::Incomplete);
        assert_eq!(Verdict::decide(false, 1, 5), Verdict::Breaks);
        assert_eq!(Verdict::decide(false, 0, 5), Verdict::ReconciledWithPending);
        assert_eq!(Verdict::decide(false, 0, 0), Verdict::Reconciled);
        assert_eq!(
            serde_json::to_string(&Verdict::ReconciledWithPending).unwrap(),
            "\"RECONCILED_WITH_PENDING\""
        );
    }
}
