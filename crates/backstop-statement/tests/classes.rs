//! Every break class and every verdict, on small CSV statements.

mod common;

use backstop_core::Status;
use backstop_statement::{BreakClass, Options, Verdict};
use common::*;

fn day() -> Options {
    let mut o = opts();
    o.since = Some(ts("2026-03-01T00:00:00Z"));
    o.until = Some(ts("2026-03-02T00:00:00Z"));
    o
}

fn base() -> MemLedger {
    MemLedger::new()
        .paid("A", 1000, "2026-03-01T10:00:00Z")
        .paid("B", 250, "2026-03-01T11:00:00Z")
}

const AB: &str = "A,1000,USD,paid,2026-03-01T10:00:05Z\nB,250,usd,Success,2026-03-01T11:00:01Z\n";

#[test]
fn everything_agrees_reconciled() {
    let mut l = base()
        // Failed tasks and tasks outside the window are not expected in the statement.
        .with(
            "F",
            Status::Failed,
            Some(usd(5)),
            Some("2026-03-01T09:00:00Z"),
        )
        .paid("OLD", 7, "2026-02-28T23:59:59Z")
        .paid("LATER", 7, "2026-03-02T00:00:01Z");
    let r = run(&mut l, &format!("{HEADER}{AB}"), &day());
    assert_eq!(r.verdict, Verdict::Reconciled, "{:#?}", r.breaks);
    assert_eq!(r.counts.records_read, 2);
    assert_eq!(r.counts.matched, 2);
    assert_eq!(r.counts.breaks, 0);
    assert_eq!(r.counts.ledger_scanned, 2);
    let usd = &r.totals.0["USD"];
    assert_eq!(
        (usd.statement_gross, usd.ledger_gross, usd.breaks_gross),
        (1250, 1250, 0)
    );
    assert!(r.incomplete_reasons.is_empty());
}

#[test]
fn missing_record() {
    let mut l = base().paid("C", 40, "2026-03-01T12:00:00Z");
    let r = run(&mut l, &format!("{HEADER}{AB}"), &day());
    assert_eq!(r.verdict, Verdict::Breaks);
    assert_eq!(classes(&r), ["missing_record"]);
    let b = &r.breaks[0];
    assert_eq!((b.key.as_str(), b.task_id), ("C", Some(l.id("C"))));
    assert_eq!(b.ledger_amount, Some(usd(40)));
    assert_eq!(b.line, None);
    assert_eq!(r.counts.missing_record, 1);
    assert_eq!(r.totals.0["USD"].breaks_gross, 40);
}

#[test]
fn pending_within_grace_on_the_ledger_side() {
    // Until 24:00 with 15 minutes of grace: 23:50 is too recent to be missing.
    let mut l = base().paid("D", 60, "2026-03-01T23:50:00Z");
    let r = run(&mut l, &format!("{HEADER}{AB}"), &day());
    assert_eq!(r.verdict, Verdict::ReconciledWithPending);
    assert_eq!(classes(&r), ["pending_within_grace"]);
    assert_eq!(r.counts.breaks, 0);
    assert_eq!(r.counts.pending_within_grace, 1);
    assert_eq!(r.totals.0["USD"].pending_gross, 60);
    assert_eq!(r.totals.0["USD"].breaks_gross, 0);
}

#[test]
fn orphan_record() {
    let mut l = base();
    let r = run(
        &mut l,
        &format!("{HEADER}{AB}E,99,USD,paid,2026-03-01T13:00:00Z\n"),
        &day(),
    );
    assert_eq!(r.verdict, Verdict::Breaks);
    assert_eq!(classes(&r), ["orphan_record"]);
    assert_eq!(r.breaks[0].task_id, None);
    assert_eq!(r.breaks[0].line, Some(4));
    assert_eq!(r.breaks[0].statement_amount, Some(usd(99)));
    assert_eq!(r.counts.orphan_record, 1);
}

#[test]
fn amount_mismatch() {
    let mut l = base();
    let r = run(
        &mut l,
        &format!("{HEADER}A,1001,USD,paid,2026-03-01T10:00:05Z\nB,250,USD,paid,\n"),
        &day(),
    );
    assert_eq!(r.verdict, Verdict::Breaks);
    assert_eq!(classes(&r), ["amount_mismatch"]);
    let b = &r.breaks[0];
    assert_eq!(b.ledger_amount, Some(usd(1000)));
    assert_eq!(b.statement_amount, Some(usd(1001)));
    assert!(
        b.detail.contains("provider minus ledger: 1"),
        "{}",
        b.detail
    );
    assert_eq!(r.totals.0["USD"].breaks_gross, 1);
}

#[test]
fn status_mismatches() {
    let mut l = base()
        .with(
            "FAILED",
            Status::Failed,
            Some(usd(5)),
            Some("2026-03-01T09:00:00Z"),
        )
        .with(
            "COMP",
            Status::Compensated,
            Some(usd(6)),
            Some("2026-03-01T09:00:00Z"),
        )
        .with("RUN", Status::Running, Some(usd(7)), None)
        .paid("PEND", 8, "2026-03-01T09:00:00Z");
    let text = format!(
        "{HEADER}A,1000,USD,reversed,2026-03-01T10:00:05Z\n\
         B,250,USD,refunded,2026-03-01T11:00:01Z\n\
         FAILED,5,USD,paid,2026-03-01T09:00:00Z\n\
         COMP,6,USD,pending,2026-03-01T09:00:00Z\n\
         RUN,7,USD,paid,2026-03-01T08:00:00Z\n\
         PEND,8,USD,processing,2026-03-01T09:00:00Z\n"
    );
    let r = run(&mut l, &text, &day());
    assert_eq!(r.verdict, Verdict::Breaks);
    assert_eq!(classes(&r), ["status_mismatch"; 6]);
    assert_eq!(r.breaks[0].statement_status.unwrap().as_str(), "reversed");
    assert_eq!(r.breaks[0].ledger_status, Some(Status::Succeeded));
    assert_eq!(r.counts.status_mismatch, 6);
    // A reversal of what the ledger says succeeded is the whole amount in dispute.
    assert_eq!(r.totals.0["USD"].breaks_gross, 1000 + 250 + 5 + 6 + 7 + 8);
}

#[test]
fn agreed_failures_match() {
    let mut l = MemLedger::new()
        .with(
            "F",
            Status::Failed,
            Some(usd(5)),
            Some("2026-03-01T09:00:00Z"),
        )
        .with("C", Status::Compensated, None, Some("2026-03-01T09:00:00Z"));
    let text = format!("{HEADER}F,5,USD,declined,\nC,6,USD,reversed,\n");
    let r = run(&mut l, &text, &day());
    assert_eq!(r.verdict, Verdict::Reconciled, "{:#?}", r.breaks);
    assert_eq!(r.counts.matched, 2);
}

#[test]
fn in_flight_tasks_are_pending_within_grace_then_status_mismatch() {
    let mut l = MemLedger::new()
        .with("R1", Status::Running, Some(usd(7)), None)
        .with("R2", Status::Pending, Some(usd(7)), None)
        .with("R3", Status::Running, Some(usd(7)), None)
        .paid("S", 9, "2026-03-01T23:55:00Z");
    let text = format!(
        "{HEADER}R1,7,USD,paid,2026-03-01T23:50:00Z\n\
         R2,7,USD,failed,2026-03-01T23:59:00Z\n\
         R3,7,USD,paid,\n\
         S,9,USD,pending,2026-03-01T23:55:00Z\n"
    );
    let r = run(&mut l, &text, &day());
    assert_eq!(
        classes(&r),
        [
            "pending_within_grace",
            "pending_within_grace",
            "status_mismatch",
            "pending_within_grace"
        ]
    );
    // R3 has no time: past grace, loud rather than silent.
    assert_eq!(r.breaks[2].key, "R3");
    assert_eq!(r.verdict, Verdict::Breaks);
}

#[test]
fn duplicate_record() {
    let mut l = base();
    let text = format!("{HEADER}{AB}A,1000,USD,paid,2026-03-01T10:00:06Z\n");
    let r = run(&mut l, &text, &day());
    assert_eq!(r.verdict, Verdict::Breaks);
    assert_eq!(classes(&r), ["duplicate_record"]);
    assert_eq!(r.breaks[0].line, Some(4));
    assert_eq!(r.breaks[0].task_id, Some(l.id("A")));
    assert_eq!(r.counts.matched, 2);
    assert_eq!(r.counts.duplicate_record, 1);
    assert_eq!(r.totals.0["USD"].statement_gross, 2250);
    assert_eq!(r.totals.0["USD"].ledger_gross, 1250);
}

#[test]
fn duplicates_across_chunks_and_missing_ledger_amounts() {
    let mut l = MemLedger::new().with("A", Status::Succeeded, None, Some("2026-03-01T10:00:00Z"));
    let mut o = day();
    o.chunk_size = 1;
    let text = format!("{HEADER}A,5,USD,paid,\nA,5,USD,paid,\nA,6,USD,paid,\n");
    let r = run(&mut l, &text, &o);
    assert_eq!(classes(&r), ["duplicate_record", "duplicate_record"]);
    assert_eq!(r.counts.matched, 1);
    assert_eq!(r.counts.amount_unchecked, 1);
    assert_eq!(l.largest_lookup, 1);
    assert_eq!(l.lookups, 3);
}

#[test]
fn incomplete_wins_over_breaks() {
    let mut l = base().paid("C", 40, "2026-03-01T12:00:00Z");
    let text = format!("{HEADER}{AB}X,12.5,USD,paid,\n");
    let r = run(&mut l, &text, &day());
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert_eq!(r.counts.malformed, 1);
    assert_eq!(classes(&r), ["missing_record"]);
    assert_eq!(r.incomplete_reasons.len(), 1);
}

#[test]
fn every_class_in_one_statement() {
    let mut l = base()
        .paid("M", 1, "2026-03-01T05:00:00Z")
        .paid("P", 2, "2026-03-01T23:59:00Z")
        .paid("AM", 3, "2026-03-01T05:00:00Z")
        .paid("SM", 4, "2026-03-01T05:00:00Z");
    let text = format!(
        "{HEADER}{AB}O,9,USD,paid,\nAM,30,USD,paid,\nSM,4,USD,chargeback,\nA,1000,USD,paid,\n"
    );
    let r = run(&mut l, &text, &day());
    let mut seen: Vec<_> = r.breaks.iter().map(|b| b.class).collect();
    seen.sort();
    assert_eq!(seen, BreakClass::ALL);
    for class in BreakClass::ALL {
        assert_eq!(r.counts.of(class), 1, "{class}");
    }
    assert_eq!(r.counts.breaks, 5);
    assert_eq!(r.verdict, Verdict::Breaks);
}

#[test]
fn report_serialises_with_the_promised_fields() {
    let mut l = base().paid("C", 40, "2026-03-01T12:00:00Z");
    let r = run(&mut l, &format!("{HEADER}{AB}"), &day());
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["verdict"], "BREAKS");
    for k in [
        "records_read",
        "matched",
        "malformed",
        "missing_record",
        "pending_within_grace",
        "orphan_record",
        "amount_mismatch",
        "status_mismatch",
        "duplicate_record",
    ] {
        assert!(v["counts"][k].is_u64(), "{k}");
    }
    assert_eq!(v["totals"]["USD"]["breaks_gross"], 40);
    assert_eq!(v["breaks"][0]["class"], "missing_record");
    assert_eq!(v["breaks"][0]["key"], "C");
    assert_eq!(v["breaks"][0]["ledger_amount"]["minor"], 40);
    assert_eq!(v["window"]["until"], "2026-03-02T00:00:00.000Z");
    assert_eq!(v["window"]["grace"], "15m");
}
