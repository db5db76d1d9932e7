//! The printed table: one row per scenario as it finishes, what went wrong under a failing
//! row, and the summary line.

use crate::profile::Scenario;
use crate::scenario::Outcome;
use std::time::Duration;

/// Rows printed so far, and how they ended.
#[derive(Default)]
pub struct Table {
    failed: Vec<&'static str>,
    skipped: usize,
    ran: usize,
}

impl Table {
    /// The column names (Markdown, so the long profile's table pastes into BENCHMARKS.md).
    pub fn header(&self) {
        println!(
            "| scenario | store | procs | faults | acknowledged | delivered | lost | duplicated | redelivered | stuck | ended | unacked | recovery | took | verdict |"
        );
        println!("|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|");
    }

    /// Prints one scenario's row.
    pub fn row(&mut self, s: &Scenario, outcome: anyhow::Result<Outcome>, took: Duration) {
        let lead = format!("| {} | {} | {} |", s.name, s.backend.name(), s.processes);
        match outcome {
            Ok(Outcome::Ran { row, faults }) => {
                self.ran += 1;
                let verdict = if row.failed() {
                    self.failed.push(s.name);
                    "FAIL"
                } else {
                    "ok"
                };
                let recovery = row
                    .recovery
                    .map(|d| format!("{:.1}s", d.as_secs_f64()))
                    .unwrap_or_else(|| "-".into());
                println!(
                    "{lead} {faults} | {} | {} | {} | {} | {} | {} | {} | {} | {recovery} | {:.0}s | {verdict} |",
                    row.acknowledged,
                    row.delivered,
                    row.lost,
                    row.duplicated,
                    row.redelivered,
                    row.stuck,
                    row.ended,
                    row.unacknowledged,
                    took.as_secs_f64()
                );
                for e in &row.examples {
                    eprintln!("    {}: {e}", s.name);
                }
            }
            Ok(Outcome::Skipped(why)) => {
                self.skipped += 1;
                println!("{lead} skipped: {why} | | | | | | | | | | | |");
            }
            Err(e) => {
                self.failed.push(s.name);
                println!("{lead} error: {e:#} | | | | | | | | | | | FAIL |");
            }
        }
    }

    /// Prints the summary; whether the suite passed.
    pub fn summary(&self, took: Duration) -> bool {
        println!();
        if self.failed.is_empty() {
            println!(
                "chaos: passed: {} scenario(s) ran, {} skipped, in {:.0}s",
                self.ran,
                self.skipped,
                took.as_secs_f64()
            );
            true
        } else {
            println!(
                "chaos: FAILED: {} (a loss, a stuck task, a duplicate under a second key, an \
                 enqueue never acknowledged, or a scenario that could not run), in {:.0}s",
                self.failed.join(", "),
                took.as_secs_f64()
            );
            false
        }
    }
}
