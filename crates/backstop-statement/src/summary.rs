//! The short human summary (`summary.txt`, and what a CLI prints).

use crate::classify::BreakClass;
use crate::report::Report;
use std::fmt::Write;

/// A few lines a person reads first: the verdict, why, the counts and the gross totals.
pub fn summary(r: &Report) -> String {
    let c = &r.counts;
    let mut s = String::new();
    let _ = writeln!(s, "reconcile {}: {}", r.kind, r.verdict);
    for reason in &r.incomplete_reasons {
        let _ = writeln!(s, "  incomplete: {reason}");
    }
    let w = &r.window;
    let _ = writeln!(
        s,
        "window: {} ({}) .. {} ({}), grace {}",
        w.since
            .map_or_else(|| "-".to_string(), backstop_core::wire_time::format),
        w.since_from,
        backstop_core::wire_time::format(w.until),
        w.until_from,
        w.grace
    );
    let _ = writeln!(
        s,
        "statement: {} rows read, {} well-formed, {} malformed{}",
        c.records_read,
        c.well_formed,
        c.malformed,
        r.declared
            .and_then(|d| d.count)
            .map_or(String::new(), |n| format!(", {n} declared"))
    );
    let _ = writeln!(
        s,
        "matched: {}{}; ledger tasks scanned: {}",
        c.matched,
        if c.amount_unchecked > 0 {
            format!(
                " ({} without a ledger amount, status only)",
                c.amount_unchecked
            )
        } else {
            String::new()
        },
        c.ledger_scanned
    );
    let classes: Vec<String> = BreakClass::ALL
        .iter()
        .map(|k| format!("{k} {}", c.of(*k)))
        .collect();
    let _ = writeln!(s, "breaks: {} ({})", c.breaks, classes.join(", "));
    for (currency, t) in &r.totals.0 {
        let _ = writeln!(
            s,
            "{currency}: statement gross {} (net {}), ledger gross {} (net {}), breaks gross {}, pending gross {} (minor units)",
            t.statement_gross,
            t.statement_net,
            t.ledger_gross,
            t.ledger_net,
            t.breaks_gross,
            t.pending_gross
        );
    }
    if r.breaks_truncated {
        let _ = writeln!(
            s,
            "report.json lists the first {} breaks; breaks.csv has all",
            r.breaks.len()
        );
    }
    s
}
