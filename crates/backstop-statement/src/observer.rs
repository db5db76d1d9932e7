//! Hooks a caller gets during a run: every break and malformed row as found (to stream them
//! to disk, however many), and progress (to drive a progress bar).

use crate::classify::Break;
use crate::record::MalformedRow;
use std::io;

/// Which part of the run is going on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Reading the statement and looking its keys up.
    Statement,
    /// Scanning the ledger's succeeded tasks for those the statement lacks.
    LedgerScan,
    /// Finished.
    Done,
}

/// How far a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// What is going on.
    pub phase: Phase,
    /// Statement bytes read (read-ahead included).
    pub bytes_read: u64,
    /// Statement rows read (records and malformed rows).
    pub rows: u64,
    /// Succeeded ledger tasks scanned.
    pub ledger_scanned: u64,
}

/// Receives what a run finds as it finds it. Every method has a default that does nothing.
pub trait Observer {
    /// A break (or pending item), in the order found. An error stops the run.
    fn on_break(&mut self, b: &Break) -> io::Result<()> {
        let _ = b;
        Ok(())
    }

    /// A malformed row. An error stops the run.
    fn on_malformed(&mut self, m: &MalformedRow) -> io::Result<()> {
        let _ = m;
        Ok(())
    }

    /// Progress, after each chunk of the statement and each page of the scan.
    fn on_progress(&mut self, p: &Progress) {
        let _ = p;
    }
}

/// Observes nothing.
impl Observer for () {}

impl<O: Observer + ?Sized> Observer for &mut O {
    fn on_break(&mut self, b: &Break) -> io::Result<()> {
        (**self).on_break(b)
    }
    fn on_malformed(&mut self, m: &MalformedRow) -> io::Result<()> {
        (**self).on_malformed(m)
    }
    fn on_progress(&mut self, p: &Progress) {
        (**self).on_progress(p)
    }
}

/// Both observers, first `A` then `B`.
impl<A: Observer, B: Observer> Observer for (A, B) {
    fn on_break(&mut self, b: &Break) -> io::Result<()> {
        self.0.on_break(b)?;
        self.1.on_break(b)
    }
    fn on_malformed(&mut self, m: &MalformedRow) -> io::Result<()> {
        self.0.on_malformed(m)?;
        self.1.on_malformed(m)
    }
    fn on_progress(&mut self, p: &Progress) {
        self.0.on_progress(p);
        self.1.on_progress(p);
    }
}

/// Progress to a closure: `OnProgress(|p| bar.set_position(p.bytes_read))`.
pub struct OnProgress<F>(pub F);

impl<F: FnMut(&Progress)> Observer for OnProgress<F> {
    fn on_progress(&mut self, p: &Progress) {
        (self.0)(p)
    }
}
