//! Exact money: integer minor units, never summed across records, never across currencies.

mod common;

use backstop_core::Status;
use backstop_statement::{Money, Verdict};
use common::*;

#[test]
fn three_records_of_10_never_pass_for_one_of_30() {
    let mut l = MemLedger::new().paid("K", 30, "2026-03-01T10:00:00Z");
    let text = format!("{HEADER}K,10,USD,paid,\nK,10,USD,paid,\nK,10,USD,paid,\n");
    let r = run(&mut l, &text, &opts());
    assert_eq!(r.verdict, Verdict::Breaks);
    assert_eq!(
        classes(&r),
        ["amount_mismatch", "duplicate_record", "duplicate_record"]
    );
    assert_eq!(r.counts.matched, 0);
    let t = &r.totals.0["USD"];
    // The naive sums agree — 30 each side — which is exactly the trap.
    assert_eq!((t.statement_net, t.ledger_net), (30, 30));
    assert_eq!((t.statement_gross, t.ledger_gross), (30, 30));
    // The breaks do not net away: |10-30| + 10 + 10.
    assert_eq!(t.breaks_gross, 40);

    // And in JSON lines, the same.
    let mut l = MemLedger::new().paid("K", 30, "2026-03-01T10:00:00Z");
    let text = r#"{"key":"K","amount":10,"currency":"USD","status":"paid"}
{"key":"K","amount":10,"currency":"USD","status":"paid"}
{"key":"K","amount":10,"currency":"USD","status":"paid"}
"#;
    let r = run(&mut l, text, &jsonl(opts()));
    assert_eq!(
        classes(&r),
        ["amount_mismatch", "duplicate_record", "duplicate_record"]
    );
}

#[test]
fn one_record_of_30_never_passes_for_a_task_of_10() {
    let mut l = MemLedger::new().paid("K", 10, "2026-03-01T10:00:00Z");
    let r = run(&mut l, &format!("{HEADER}K,30,USD,paid,\n"), &opts());
    assert_eq!(classes(&r), ["amount_mismatch"]);
    assert_eq!(r.totals.0["USD"].breaks_gross, 20);
}

#[test]
fn offsetting_breaks_cannot_net_to_zero() {
    let mut l = MemLedger::new()
        .paid("A", 100, "2026-03-01T10:00:00Z")
        .paid("B", 100, "2026-03-01T10:00:00Z");
    let r = run(
        &mut l,
        &format!("{HEADER}A,105,USD,paid,\nB,95,USD,paid,\n"),
        &opts(),
    );
    let t = &r.totals.0["USD"];
    assert_eq!(t.statement_net, t.ledger_net);
    assert_eq!(t.statement_gross, t.ledger_gross);
    assert_eq!(t.breaks_gross, 10);
    assert_eq!(r.verdict, Verdict::Breaks);
    assert_eq!(r.counts.amount_mismatch, 2);
}

#[test]
fn mixed_currencies_never_match() {
    let mut l = MemLedger::new()
        .paid("K", 1000, "2026-03-01T10:00:00Z")
        .with(
            "J",
            Status::Succeeded,
            Some(Money::new(1000, "JPY")),
            Some("2026-03-01T10:00:00Z"),
        );
    let r = run(
        &mut l,
        &format!("{HEADER}K,1000,EUR,paid,\nJ,1000,jpy,paid,\n"),
        &opts(),
    );
    assert_eq!(classes(&r), ["amount_mismatch"]);
    assert!(
        r.breaks[0].detail.contains("currency differs"),
        "{}",
        r.breaks[0].detail
    );
    assert_eq!(r.totals.0["EUR"].breaks_gross, 1000);
    assert_eq!(r.totals.0["USD"].breaks_gross, 1000);
    assert_eq!(r.totals.0["JPY"].breaks_gross, 0);
    assert_eq!(r.counts.matched, 1);
}

#[test]
fn extreme_amounts_are_exact_and_sums_do_not_overflow() {
    let max = i64::MAX;
    let mut l = MemLedger::new()
        .paid("A", max, "2026-03-01T10:00:00Z")
        .paid("B", max, "2026-03-01T10:00:00Z")
        .paid("C", i64::MIN, "2026-03-01T10:00:00Z");
    let text = format!(
        "{HEADER}A,{max},USD,paid,\nB,{},USD,paid,\nC,{},USD,paid,\n",
        max - 1,
        i64::MIN
    );
    let r = run(&mut l, &text, &opts());
    assert_eq!(classes(&r), ["amount_mismatch"]);
    assert_eq!(r.breaks[0].key, "B");
    let t = &r.totals.0["USD"];
    assert_eq!(t.ledger_gross, 2 * i128::from(max) + i128::from(max) + 1);
    assert_eq!(t.breaks_gross, 1);
}

#[test]
fn decimals_and_exponents_are_refused_not_rounded() {
    let mut l = MemLedger::new().paid("K", 10, "2026-03-01T10:00:00Z");
    let r = run(&mut l, &format!("{HEADER}K,10.00,USD,paid,\n"), &opts());
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert!(
        r.malformed[0].reason.contains("decimal"),
        "{}",
        r.malformed[0].reason
    );
    // Its key was readable: the task is not reported missing on top.
    assert_eq!(r.counts.missing_record, 0);

    for amount in ["10.0", "1e1", "1E1", "10.5", "\"10.5\"", "true", "null"] {
        let text = format!(r#"{{"key":"K","amount":{amount},"currency":"USD","status":"paid"}}"#);
        let mut l = MemLedger::new().paid("K", 10, "2026-03-01T10:00:00Z");
        let r = run(&mut l, &text, &jsonl(opts()));
        assert_eq!(r.counts.malformed, 1, "{amount}");
        assert_eq!(r.verdict, Verdict::Incomplete, "{amount}");
    }
    let mut l = MemLedger::new().paid("K", 10, "2026-03-01T10:00:00Z");
    let r = run(
        &mut l,
        r#"{"key":"K","amount":"10","currency":"USD","status":"paid"}"#,
        &jsonl(opts()),
    );
    assert_eq!(r.verdict, Verdict::Reconciled);
}
