//! The outcome of a reconciliation, as `report.json` shows it.

use crate::classify::{Break, BreakClass};
use crate::format::StatementFormat;
use crate::record::{Declared, MalformedRow};
use crate::totals::Totals;
use crate::verdict::Verdict;
use crate::window::Window;
use backstop_core::wire_time;
use jiff::Timestamp;
use serde::Serialize;

/// How many of each.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Data rows read from the statement: well-formed and malformed (a trailer is not one).
    pub records_read: u64,
    /// Rows read as records.
    pub well_formed: u64,
    /// Rows that could not be read; each is listed.
    pub malformed: u64,
    /// Records that agree with their task.
    pub matched: u64,
    /// Matched records whose task has no amount, so only the status was compared.
    pub amount_unchecked: u64,
    /// Succeeded ledger tasks the scan looked at.
    pub ledger_scanned: u64,
    /// Real breaks (every class but `pending_within_grace`).
    pub breaks: u64,
    /// `missing_record` breaks.
    pub missing_record: u64,
    /// `pending_within_grace` items.
    pub pending_within_grace: u64,
    /// `orphan_record` breaks.
    pub orphan_record: u64,
    /// `amount_mismatch` breaks.
    pub amount_mismatch: u64,
    /// `status_mismatch` breaks.
    pub status_mismatch: u64,
    /// `duplicate_record` breaks.
    pub duplicate_record: u64,
}

impl Counts {
    /// The count of one class.
    pub fn of(&self, class: BreakClass) -> u64 {
        match class {
            BreakClass::MissingRecord => self.missing_record,
            BreakClass::PendingWithinGrace => self.pending_within_grace,
            BreakClass::OrphanRecord => self.orphan_record,
            BreakClass::AmountMismatch => self.amount_mismatch,
            BreakClass::StatusMismatch => self.status_mismatch,
            BreakClass::DuplicateRecord => self.duplicate_record,
        }
    }

    /// Counts one more of `class`.
    pub(crate) fn add(&mut self, class: BreakClass) {
        let slot = match class {
            BreakClass::MissingRecord => &mut self.missing_record,
            BreakClass::PendingWithinGrace => &mut self.pending_within_grace,
            BreakClass::OrphanRecord => &mut self.orphan_record,
            BreakClass::AmountMismatch => &mut self.amount_mismatch,
            BreakClass::StatusMismatch => &mut self.status_mismatch,
            BreakClass::DuplicateRecord => &mut self.duplicate_record,
        };
        *slot += 1;
        if class.is_break() {
            self.breaks += 1;
        }
    }
}

/// The outcome of a reconciliation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The conclusion.
    pub verdict: Verdict,
    /// The kind of task reconciled.
    pub kind: String,
    /// When the reconciliation ran (the caller's clock).
    #[serde(with = "wire_time")]
    pub checked_at: Timestamp,
    /// The statement's format.
    pub format: StatementFormat,
    /// The column map used (`key=…,amount=…,…`).
    pub columns: String,
    /// The window of the ledger side.
    pub window: Window,
    /// What the statement declared about itself, when it did (trailer, or the caller's
    /// expected count).
    pub declared: Option<Declared>,
    /// The row count the caller expected (`--expect-count`), when given.
    pub expected_count: Option<u64>,
    /// Why the verdict is `INCOMPLETE`, one sentence each; empty otherwise.
    pub incomplete_reasons: Vec<String>,
    /// How many of each.
    pub counts: Counts,
    /// Gross and net totals per currency.
    pub totals: Totals,
    /// The breaks and pending items, in the order found: all of them unless
    /// `breaks_truncated` (then the first `Options::list_limit`; `breaks.csv` has all).
    pub breaks: Vec<Break>,
    /// Whether `breaks` stops short of `counts.breaks + counts.pending_within_grace`.
    pub breaks_truncated: bool,
    /// The malformed rows, likewise capped (`malformed.csv` has all).
    pub malformed: Vec<MalformedRow>,
    /// Whether `malformed` stops short of `counts.malformed`.
    pub malformed_truncated: bool,
}
