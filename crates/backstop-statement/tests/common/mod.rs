//! The caller's side for tests: a ledger held in a map (what the binary does over its
//! store), and helpers to run a statement text through the reconciliation.
#![allow(dead_code)]

use backstop_core::{Status, TaskId};
use backstop_statement::{
    Ledger, LedgerEntry, LedgerPage, Money, Observer, Options, Report, ScanQuery, StatementFormat,
    reconcile,
};
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::convert::Infallible;

/// Tasks by key; pages by key order.
#[derive(Default)]
pub struct MemLedger {
    pub tasks: BTreeMap<String, LedgerEntry>,
    pub lookups: usize,
    pub largest_lookup: usize,
    pub pages: usize,
}

impl MemLedger {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with(
        mut self,
        key: &str,
        status: Status,
        amount: Option<Money>,
        finished: Option<&str>,
    ) -> Self {
        self.tasks.insert(
            key.to_string(),
            LedgerEntry {
                task_id: TaskId::new(),
                key: key.to_string(),
                status,
                amount,
                finished_at: finished.map(ts),
            },
        );
        self
    }

    /// A succeeded task of `minor` USD finished at `finished`.
    pub fn paid(self, key: &str, minor: i64, finished: &str) -> Self {
        self.with(
            key,
            Status::Succeeded,
            Some(Money::new(minor, "USD")),
            Some(finished),
        )
    }

    pub fn id(&self, key: &str) -> TaskId {
        self.tasks[key].task_id
    }
}

impl Ledger for MemLedger {
    type Error = Infallible;

    async fn lookup(&mut self, keys: &[String]) -> Result<Vec<LedgerEntry>, Infallible> {
        self.lookups += 1;
        self.largest_lookup = self.largest_lookup.max(keys.len());
        Ok(keys
            .iter()
            .filter_map(|k| self.tasks.get(k).cloned())
            .collect())
    }

    async fn succeeded_page(&mut self, q: &ScanQuery) -> Result<LedgerPage, Infallible> {
        self.pages += 1;
        let start = q.cursor.clone();
        let mut entries = Vec::new();
        let mut last = None;
        let range = self.tasks.range::<String, _>((
            start.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded),
            std::ops::Bound::Unbounded,
        ));
        for (k, e) in range {
            if entries.len() == q.limit {
                return Ok(LedgerPage {
                    entries,
                    next: last,
                });
            }
            last = Some(k.clone());
            // Loose filtering on purpose: the engine filters status and window again.
            entries.push(e.clone());
        }
        Ok(LedgerPage {
            entries,
            next: None,
        })
    }
}

pub fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

pub fn usd(minor: i64) -> Money {
    Money::new(minor, "USD")
}

/// Options for kind `pay.charge` at a fixed `now`.
pub fn opts() -> Options {
    Options::new("pay.charge", ts("2026-03-02T12:00:00Z"))
}

pub fn jsonl(mut o: Options) -> Options {
    o.read.format = StatementFormat::Jsonl;
    o
}

pub fn run(ledger: &mut MemLedger, text: &str, o: &Options) -> Report {
    run_with(ledger, text, o, &mut ())
}

pub fn run_with<O: Observer>(
    ledger: &mut MemLedger,
    text: &str,
    o: &Options,
    obs: &mut O,
) -> Report {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(reconcile(ledger, text.as_bytes(), o, obs))
        .expect("reconcile")
}

/// The classes of the report's breaks, as names, in order.
pub fn classes(r: &Report) -> Vec<&'static str> {
    r.breaks.iter().map(|b| b.class.as_str()).collect()
}

pub const HEADER: &str = "key,amount,currency,status,at\n";

pub fn run_bytes(ledger: &mut MemLedger, bytes: &[u8], o: &Options) -> Report {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(reconcile(ledger, bytes, o, &mut ()))
        .expect("reconcile")
}
