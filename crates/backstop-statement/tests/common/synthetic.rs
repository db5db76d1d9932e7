//! A statement of any size generated on the fly, and the ledger it should reconcile with,
//! computed from the row number: neither side is ever held in memory, so what is measured
//! is the reconciliation alone. Shared by the streaming test and `examples/bench_statement`.
//!
//! Row `i` has key `ord-{i:09}`, amount `100 + i % 9973` USD, status `paid`, and a time
//! spread over one day. Every 50,000 rows, five planted differences (offsets 1 to 5):
//! amount +1 (amount_mismatch), `reversed` (status_mismatch), no task (orphan_record), no
//! row (missing_record), the row twice (duplicate_record).
#![allow(dead_code)]

use backstop_core::{Status, TaskId};
use backstop_statement::{Ledger, LedgerEntry, LedgerPage, Money, ScanQuery};
use jiff::{SignedDuration, Timestamp};
use std::convert::Infallible;
use std::io::{self, Read};

pub const PERIOD: u64 = 50_000;

fn base() -> Timestamp {
    "2026-03-01T00:00:00Z".parse().unwrap()
}

/// When row `i` of `n` happened.
pub fn time_of(i: u64, n: u64) -> Timestamp {
    let step = 86_000_000_000_000i64 / n.max(1) as i64; // spread over ~23.9 h, in ns
    base() + SignedDuration::from_nanos(step * i as i64)
}

pub fn amount_of(i: u64) -> i64 {
    100 + (i % 9973) as i64
}

fn planted(i: u64) -> u64 {
    i % PERIOD
}

/// The number of planted differences of each class in `n` rows.
pub fn planted_count(n: u64) -> u64 {
    n / PERIOD + u64::from(n % PERIOD > 5)
}

/// The statement as CSV (or JSON lines), produced as it is read.
pub struct CsvGen {
    n: u64,
    jsonl: bool,
    i: u64,
    buf: Vec<u8>,
    pos: usize,
    header: bool,
    trailer: bool,
}

impl CsvGen {
    pub fn new(n: u64) -> Self {
        CsvGen {
            n,
            jsonl: false,
            i: 0,
            buf: Vec::with_capacity(64 * 1024),
            pos: 0,
            header: false,
            trailer: false,
        }
    }

    /// The same rows as JSON lines.
    pub fn jsonl(n: u64) -> Self {
        CsvGen {
            jsonl: true,
            header: true,
            ..Self::new(n)
        }
    }

    /// The number of data rows it will produce.
    pub fn rows(n: u64) -> u64 {
        let skipped = planted_count(n);
        n - skipped + planted_count(n)
    }

    fn refill(&mut self) {
        use std::io::Write;
        self.buf.clear();
        self.pos = 0;
        if !self.header {
            self.header = true;
            self.buf
                .extend_from_slice(b"key,amount,currency,status,at\n");
        }
        while self.buf.len() < 60 * 1024 && self.i < self.n {
            let i = self.i;
            self.i += 1;
            let (amount, status) = match planted(i) {
                1 => (amount_of(i) + 1, "paid"),
                2 => (amount_of(i), "reversed"),
                4 => continue,
                _ => (amount_of(i), "paid"),
            };
            let times = if planted(i) == 5 { 2 } else { 1 };
            let at = backstop_core::wire_time::format(time_of(i, self.n));
            for _ in 0..times {
                let _ = if self.jsonl {
                    writeln!(
                        self.buf,
                        r#"{{"key":"ord-{i:09}","amount":{amount},"currency":"USD","status":"{status}","at":"{at}"}}"#
                    )
                } else {
                    writeln!(self.buf, "ord-{i:09},{amount},USD,{status},{at}")
                };
            }
        }
        if self.i == self.n && self.buf.is_empty() && !self.trailer {
            self.trailer = true;
            let _ = if self.jsonl {
                writeln!(
                    self.buf,
                    r#"{{"_trailer":{{"count":{}}}}}"#,
                    Self::rows(self.n)
                )
            } else {
                writeln!(self.buf, "#count,{},,,", Self::rows(self.n))
            };
        }
    }
}

impl Read for CsvGen {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.buf.len() {
            self.refill();
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The ledger side of the same rows.
pub struct SynthLedger {
    pub n: u64,
    pub lookups: u64,
    pub largest_lookup: usize,
}

impl SynthLedger {
    pub fn new(n: u64) -> Self {
        SynthLedger {
            n,
            lookups: 0,
            largest_lookup: 0,
        }
    }

    fn entry(&self, i: u64) -> Option<LedgerEntry> {
        if i >= self.n || planted(i) == 3 {
            return None;
        }
        Some(LedgerEntry {
            // Deterministic, and no system randomness per task: this ledger must cost next
            // to nothing so that the reconciliation is what is measured.
            task_id: TaskId(uuid::Uuid::from_u128(
                0x0190_0000_0000_7000_8000_0000_0000_0000 | u128::from(i),
            )),
            key: format!("ord-{i:09}"),
            status: Status::Succeeded,
            amount: Some(Money {
                minor: amount_of(i),
                currency: "USD".into(),
            }),
            finished_at: Some(time_of(i, self.n)),
        })
    }
}

impl Ledger for SynthLedger {
    type Error = Infallible;

    async fn lookup(&mut self, keys: &[String]) -> Result<Vec<LedgerEntry>, Infallible> {
        self.lookups += 1;
        self.largest_lookup = self.largest_lookup.max(keys.len());
        Ok(keys
            .iter()
            .filter_map(|k| k.strip_prefix("ord-")?.parse::<u64>().ok())
            .filter_map(|i| self.entry(i))
            .collect())
    }

    async fn succeeded_page(&mut self, q: &ScanQuery) -> Result<LedgerPage, Infallible> {
        let start: u64 = q.cursor.as_deref().map_or(0, |c| c.parse().unwrap());
        let end = (start + q.limit as u64).min(self.n);
        let entries = (start..end).filter_map(|i| self.entry(i)).collect();
        Ok(LedgerPage {
            entries,
            next: (end < self.n).then(|| end.to_string()),
        })
    }
}
