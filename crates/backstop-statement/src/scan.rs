//! The ledger's side: pages through the succeeded tasks in the window for those the
//! statement lacks (`missing_record`, or `pending_within_grace` within the grace window).

use crate::classify::{Break, BreakClass};
use crate::ledger::{Ledger, ScanQuery};
use crate::observer::{Observer, Phase};
use crate::run::{ReconcileError, Run};
use backstop_core::Status;
use jiff::Timestamp;

impl<O: Observer> Run<'_, O> {
    /// Pages through the ledger's succeeded tasks in the window for those the statement
    /// lacks.
    pub(crate) async fn scan<L: Ledger>(
        &mut self,
        ledger: &mut L,
        since: Option<Timestamp>,
        until: Timestamp,
        cutoff: Timestamp,
        bytes: u64,
    ) -> Result<(), ReconcileError> {
        let mut query = ScanQuery {
            since,
            until: Some(until),
            cursor: None,
            limit: self.opts.scan_page.max(1),
        };
        loop {
            let page = ledger
                .succeeded_page(&query)
                .await
                .map_err(|e| ReconcileError::Ledger(Box::new(e)))?;
            for e in &page.entries {
                if e.status != Status::Succeeded {
                    continue;
                }
                if let Some(f) = e.finished_at
                    && (since.is_some_and(|s| f < s) || f > until)
                {
                    continue;
                }
                self.counts.ledger_scanned += 1;
                if self.seen.contains(&e.key) {
                    continue;
                }
                if let Some(a) = &e.amount {
                    self.totals.add_ledger(a);
                }
                let b = if e.finished_at.is_some_and(|f| f > cutoff) {
                    Break::from_entry(
                        BreakClass::PendingWithinGrace,
                        e,
                        "the task succeeded within the grace window; the provider has no record yet".into(),
                    )
                } else {
                    Break::from_entry(
                        BreakClass::MissingRecord,
                        e,
                        "the task succeeded but the provider has no record of it".into(),
                    )
                };
                self.add_break(b)?;
            }
            let p = self.progress(Phase::LedgerScan, bytes, self.counts.ledger_scanned);
            self.observer.on_progress(&p);
            match page.next {
                None => return Ok(()),
                Some(next) if query.cursor.as_ref() == Some(&next) => {
                    return Err(ReconcileError::ScanStalled(next));
                }
                Some(next) => query.cursor = Some(next),
            }
        }
    }
}
