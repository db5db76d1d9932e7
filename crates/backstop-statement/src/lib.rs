//! Statement reconciliation: a provider's statement (CSV or JSON lines) held against the
//! ledger's tasks of one kind. Pure: no store and no clock; the caller provides the ledger
//! side through [`Ledger`] and the time through [`Options::now`].
//!
//! # The statement
//!
//! Read as a stream ([`StatementReader`]), a row at a time. Each record has a key, an amount
//! in exact integer minor units (never a float: `10.5` and `1e3` are refused), a currency,
//! the provider's status ([`ProviderStatus`], normalised from its many words; an unknown word
//! makes the row malformed rather than guessed), and optionally a time. A [`ColumnMap`] says
//! which column holds which.
//!
//! A statement may declare its own size, before its data (a header declaration, which
//! survives truncation) or after it (a trailer), and it is checked against what was read:
//! - CSV: rows whose key column holds `#count` or `#amount_total`, the number in the amount
//!   column (`#count,1000000,,,`).
//! - JSON lines: a line `{"_trailer":{"count":1000000,"amount_total":123456}}`.
//!
//! `count` is the number of data rows (malformed ones included, declarations not),
//! `amount_total` the signed sum of their amounts in minor units over every currency. The
//! caller may also declare a count ([`Options::expect_count`]) or require one
//! ([`Options::require_count`]). Data after a trailer is malformed.
//!
//! # Matching
//!
//! Records are looked up by key a chunk at a time and classified ([`classify`] has the
//! table); then the ledger's succeeded tasks in the window are scanned a page at a time for
//! those the statement lacks (`missing_record`, or `pending_within_grace` when they finished
//! within the grace window before the statement's end). Every record is compared on its own:
//! a repeated key is a `duplicate_record`, never summed, so three records of 10 do not pass
//! for one of 30; different currencies never match.
//!
//! # The outcome
//!
//! A [`Report`] with a [`Verdict`] (`INCOMPLETE` when rows are unreadable or the statement
//! disagrees with its declaration; else `BREAKS`, `RECONCILED_WITH_PENDING` or `RECONCILED`),
//! counts, gross totals per currency (sums of absolute values, so offsetting breaks cannot
//! net to zero), and the breaks. [`ReportDir`] writes `report.json`, `breaks.csv`,
//! `malformed.csv` and `summary.txt`, streaming the CSVs so that every break is on disk
//! while the JSON keeps the first [`Options::list_limit`].

pub mod classify;
pub mod column_map;
pub mod format;
mod keyset;
pub mod ledger;
pub mod money;
pub mod observer;
pub mod reader;
pub mod reader_csv;
pub mod reader_jsonl;
pub mod record;
pub mod report;
pub mod report_dir;
pub mod run;
mod scan;
pub mod status;
pub mod summary;
pub mod totals;
pub mod verdict;
pub mod window;

pub use classify::{Break, BreakClass, Outcome, classify_record};
pub use column_map::{BadColumnMap, ColumnMap};
pub use format::{StatementFormat, UnknownFormat};
pub use ledger::{Ledger, LedgerEntry, LedgerPage, ScanQuery};
pub use money::{Money, parse_currency, parse_minor};
pub use observer::{Observer, OnProgress, Phase, Progress};
pub use reader::{ReadError, ReadOptions, StatementReader};
pub use record::{Declared, MalformedRow, Row, StatementRecord};
pub use report::{Counts, Report};
pub use report_dir::{ReportDir, ReportFiles};
pub use run::{Options, ReconcileError, reconcile};
pub use status::ProviderStatus;
pub use summary::summary;
pub use totals::{CurrencyTotals, Totals};
pub use verdict::Verdict;
pub use window::Window;
