//! The break classes, and how one statement record compares with the ledger's task.
//!
//! | ledger \ provider      | succeeded              | pending           | failed / reversed |
//! |------------------------|------------------------|-------------------|-------------------|
//! | succeeded              | amounts compared       | pending ¹ / status | status_mismatch  |
//! | pending, running       | pending ² / status     | pending ² / status | pending ² / status |
//! | failed, compensated    | status_mismatch        | status_mismatch   | matched           |
//! | (no task)              | orphan_record          | orphan_record     | orphan_record     |
//!
//! ¹ `pending_within_grace` when the task finished within the grace window before the
//! statement's end, `status_mismatch` after it. ² A task still in flight has not reached an
//! end to compare: `pending_within_grace` when the record's time is within the grace window,
//! `status_mismatch` after it; a record without a time is past grace (loud rather than
//! silent). A key seen before in the statement is a `duplicate_record`
//! whatever it says: amounts are never summed across records, so three records of 10 never
//! pass for one of 30. A task the statement lacks is a `missing_record` (see the scan).

use crate::ledger::LedgerEntry;
use crate::money::Money;
use crate::record::StatementRecord;
use crate::status::ProviderStatus;
use backstop_core::{Status, TaskId, wire_time};
use jiff::Timestamp;
use serde::Serialize;
use std::fmt;

/// The kinds of difference between a statement and the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakClass {
    /// The task succeeded in the window, past the grace period, and the provider has no
    /// record of it.
    MissingRecord,
    /// The two sides disagree only by lag still within the grace window: a task that
    /// succeeded too recently for the statement, or a record the ledger has not finished
    /// yet. Not a break for the verdict, but listed.
    PendingWithinGrace,
    /// The provider has a record the ledger has no task for.
    OrphanRecord,
    /// Both sides say it happened, for different money (amount or currency).
    AmountMismatch,
    /// The sides disagree about what happened (e.g. the provider reversed or failed what
    /// the ledger says succeeded).
    StatusMismatch,
    /// The statement has the key more than once; every record after the first.
    DuplicateRecord,
}

impl BreakClass {
    /// Every class, in report order.
    pub const ALL: [BreakClass; 6] = [
        BreakClass::MissingRecord,
        BreakClass::PendingWithinGrace,
        BreakClass::OrphanRecord,
        BreakClass::AmountMismatch,
        BreakClass::StatusMismatch,
        BreakClass::DuplicateRecord,
    ];

    /// The snake-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakClass::MissingRecord => "missing_record",
            BreakClass::PendingWithinGrace => "pending_within_grace",
            BreakClass::OrphanRecord => "orphan_record",
            BreakClass::AmountMismatch => "amount_mismatch",
            BreakClass::StatusMismatch => "status_mismatch",
            BreakClass::DuplicateRecord => "duplicate_record",
        }
    }

    /// Whether it is a real break (everything but `pending_within_grace`).
    pub fn is_break(self) -> bool {
        self != BreakClass::PendingWithinGrace
    }
}

impl fmt::Display for BreakClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One difference, with both sides as far as they exist.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Break {
    /// What kind of difference.
    pub class: BreakClass,
    /// The business key.
    pub key: String,
    /// The ledger's task, when there is one.
    pub task_id: Option<TaskId>,
    /// The statement's line, when the break comes from a record.
    pub line: Option<u64>,
    /// The ledger's status.
    pub ledger_status: Option<Status>,
    /// The ledger's amount.
    pub ledger_amount: Option<Money>,
    /// When the task finished.
    #[serde(with = "wire_time::option")]
    pub finished_at: Option<Timestamp>,
    /// The provider's status.
    pub statement_status: Option<ProviderStatus>,
    /// The provider's amount.
    pub statement_amount: Option<Money>,
    /// The provider's time of the record.
    #[serde(with = "wire_time::option")]
    pub at: Option<Timestamp>,
    /// One sentence for a person.
    pub detail: String,
}

impl Break {
    /// A break about a ledger task alone (`missing_record`, a ledger-side pending).
    pub fn from_entry(class: BreakClass, entry: &LedgerEntry, detail: String) -> Break {
        Break {
            class,
            key: entry.key.clone(),
            task_id: Some(entry.task_id),
            line: None,
            ledger_status: Some(entry.status),
            ledger_amount: entry.amount.clone(),
            finished_at: entry.finished_at,
            statement_status: None,
            statement_amount: None,
            at: None,
            detail,
        }
    }

    fn from_record(
        class: BreakClass,
        rec: &StatementRecord,
        entry: Option<&LedgerEntry>,
        detail: String,
    ) -> Break {
        Break {
            class,
            key: rec.key.clone(),
            task_id: entry.map(|e| e.task_id),
            line: Some(rec.line),
            ledger_status: entry.map(|e| e.status),
            ledger_amount: entry.and_then(|e| e.amount.clone()),
            finished_at: entry.and_then(|e| e.finished_at),
            statement_status: Some(rec.status),
            statement_amount: Some(rec.amount.clone()),
            at: rec.at,
            detail,
        }
    }
}

/// How a record compares with the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The two sides agree. `amount_checked` is false when money moved but the ledger has no
    /// amount for the task, so only the status could be compared (the verdict is then at
    /// best `INCOMPLETE`).
    Matched {
        /// Whether the amounts were compared.
        amount_checked: bool,
    },
    /// A difference.
    Break(Break),
}

/// Compares one record with the ledger's task for its key (`None`: no task). `duplicate`:
/// the key appeared earlier in the statement. A time after `grace_cutoff` is within grace.
pub fn classify_record(
    rec: &StatementRecord,
    entry: Option<&LedgerEntry>,
    duplicate: bool,
    grace_cutoff: Timestamp,
) -> Outcome {
    let brk = |class, detail: String| Outcome::Break(Break::from_record(class, rec, entry, detail));
    if duplicate {
        return brk(
            BreakClass::DuplicateRecord,
            format!(
                "key appears again on line {}; only its first record is compared",
                rec.line
            ),
        );
    }
    let Some(e) = entry else {
        return brk(
            BreakClass::OrphanRecord,
            format!(
                "provider says {} for {} but the ledger has no such task",
                rec.status, rec.amount
            ),
        );
    };
    let within = |t: Option<Timestamp>| t.is_some_and(|t| t > grace_cutoff);
    use ProviderStatus as P;
    match (e.status, rec.status) {
        (Status::Succeeded, P::Succeeded) => match &e.amount {
            None => Outcome::Matched {
                amount_checked: false,
            },
            Some(l) if l.same_as(&rec.amount) => Outcome::Matched {
                amount_checked: true,
            },
            Some(l) if l.currency != rec.amount.currency => brk(
                BreakClass::AmountMismatch,
                format!("currency differs: provider {}, ledger {l}", rec.amount),
            ),
            Some(l) => brk(
                BreakClass::AmountMismatch,
                format!(
                    "provider {}, ledger {l} (provider minus ledger: {})",
                    rec.amount,
                    i128::from(rec.amount.minor) - i128::from(l.minor)
                ),
            ),
        },
        (Status::Succeeded, P::Pending) if within(e.finished_at) => brk(
            BreakClass::PendingWithinGrace,
            "the task succeeded recently and the provider still says pending".into(),
        ),
        (Status::Succeeded, p) => brk(
            BreakClass::StatusMismatch,
            format!("the ledger says succeeded, the provider says {p}"),
        ),
        (Status::Pending | Status::Running, _) if within(rec.at) => brk(
            BreakClass::PendingWithinGrace,
            format!(
                "the task is still {} and the provider says {} within the grace window",
                e.status, rec.status
            ),
        ),
        (s @ (Status::Pending | Status::Running), p) => brk(
            BreakClass::StatusMismatch,
            format!("the task is still {s} past the grace window; the provider says {p}"),
        ),
        (s @ (Status::Failed | Status::Compensated), p @ (P::Succeeded | P::Pending)) => brk(
            BreakClass::StatusMismatch,
            format!("the ledger says {s}, the provider says {p}"),
        ),
        // Nothing moved on either side, so there is no amount to agree on: nothing was left
        // unchecked.
        (Status::Failed | Status::Compensated, P::Failed | P::Reversed) => Outcome::Matched {
            amount_checked: true,
        },
    }
}
