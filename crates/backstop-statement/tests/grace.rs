//! The window and its grace period, at their boundaries.

mod common;

use backstop_core::Status;
use backstop_statement::{Options, Verdict};
use common::*;
use std::time::Duration;

fn day() -> Options {
    let mut o = opts();
    o.since = Some(ts("2026-03-01T00:00:00Z"));
    o.until = Some(ts("2026-03-02T00:00:00Z"));
    o
}

fn class_of(r: &backstop_statement::Report, key: &str) -> Option<&'static str> {
    r.breaks
        .iter()
        .find(|b| b.key == key)
        .map(|b| b.class.as_str())
}

#[test]
fn grace_and_window_boundaries() {
    let mut l = MemLedger::new()
        .paid("BEFORE", 1, "2026-02-28T23:59:59.999Z")
        .paid("SINCE", 1, "2026-03-01T00:00:00Z")
        .paid("CUTOFF", 1, "2026-03-01T23:45:00Z")
        .paid("AFTER_CUTOFF", 1, "2026-03-01T23:45:00.001Z")
        .paid("UNTIL", 1, "2026-03-02T00:00:00Z")
        .paid("AFTER_UNTIL", 1, "2026-03-02T00:00:00.001Z");
    let r = run(&mut l, HEADER, &day());
    assert_eq!(class_of(&r, "BEFORE"), None);
    assert_eq!(class_of(&r, "SINCE"), Some("missing_record"));
    // Exactly the grace period old is past grace.
    assert_eq!(class_of(&r, "CUTOFF"), Some("missing_record"));
    assert_eq!(class_of(&r, "AFTER_CUTOFF"), Some("pending_within_grace"));
    assert_eq!(class_of(&r, "UNTIL"), Some("pending_within_grace"));
    assert_eq!(class_of(&r, "AFTER_UNTIL"), None);
    assert_eq!(r.counts.ledger_scanned, 4);
    assert_eq!(r.window.grace_cutoff, ts("2026-03-01T23:45:00Z"));

    let mut o = day();
    o.grace = Duration::ZERO;
    let r = run(&mut l, HEADER, &o);
    // No grace: everything in the window is due, `until` itself included.
    assert_eq!(r.counts.missing_record, 4);
    assert_eq!(r.counts.pending_within_grace, 0);
}

#[test]
fn the_window_defaults_to_the_statement_times() {
    let mut l = MemLedger::new()
        .paid("A", 1, "2026-03-01T01:00:00Z")
        .paid("B", 1, "2026-03-01T20:00:00Z")
        .paid("EARLY", 1, "2026-03-01T00:30:00Z")
        .paid("GAP", 1, "2026-03-01T12:00:00Z")
        .paid("RECENT", 1, "2026-03-01T19:50:00Z")
        .paid("LATE", 1, "2026-03-01T21:00:00Z");
    let text =
        format!("{HEADER}A,1,USD,paid,2026-03-01T01:00:00Z\nB,1,USD,paid,2026-03-01T20:00:00Z\n");
    let r = run(&mut l, &text, &opts());
    assert_eq!(r.window.since, Some(ts("2026-03-01T01:00:00Z")));
    assert_eq!(r.window.until, ts("2026-03-01T20:00:00Z"));
    assert_eq!(class_of(&r, "EARLY"), None);
    assert_eq!(class_of(&r, "GAP"), Some("missing_record"));
    assert_eq!(class_of(&r, "RECENT"), Some("pending_within_grace"));
    assert_eq!(class_of(&r, "LATE"), None);

    // Without times anywhere, the window ends now and has no start.
    let r = run(
        &mut l,
        &format!("{HEADER}A,1,USD,paid,\nB,1,USD,paid,\n"),
        &opts(),
    );
    assert_eq!((r.window.since_from, r.window.until_from), ("none", "now"));
    assert_eq!(r.window.since, None);
    assert_eq!(r.counts.missing_record, 4);
}

#[test]
fn in_flight_records_wait_for_the_statement_end_when_until_is_not_given() {
    // Records out of time order and one per chunk, so the cutoff rises while reading.
    let mut l = MemLedger::new()
        .with("LATE_RUN", Status::Running, None, None)
        .with("EARLY_RUN", Status::Running, None, None)
        .paid("WAITING", 1, "2026-03-01T19:55:00Z")
        .paid("STALE", 1, "2026-03-01T10:00:00Z")
        .paid("X", 1, "2026-03-01T20:00:00Z");
    let text = format!(
        "{HEADER}LATE_RUN,1,USD,paid,2026-03-01T19:50:00Z\n\
         WAITING,1,USD,pending,2026-03-01T19:55:00Z\n\
         STALE,1,USD,pending,2026-03-01T19:56:00Z\n\
         X,1,USD,paid,2026-03-01T20:00:00Z\n\
         EARLY_RUN,1,USD,paid,2026-03-01T01:00:00Z\n"
    );
    for chunk_size in [1, 2, 5_000] {
        let mut o = opts();
        o.chunk_size = chunk_size;
        let r = run(&mut l, &text, &o);
        assert_eq!(
            class_of(&r, "LATE_RUN"),
            Some("pending_within_grace"),
            "{chunk_size}"
        );
        assert_eq!(
            class_of(&r, "WAITING"),
            Some("pending_within_grace"),
            "{chunk_size}"
        );
        assert_eq!(
            class_of(&r, "STALE"),
            Some("status_mismatch"),
            "{chunk_size}"
        );
        assert_eq!(
            class_of(&r, "EARLY_RUN"),
            Some("status_mismatch"),
            "{chunk_size}"
        );
        assert_eq!(r.counts.breaks, 2);
        assert_eq!(r.counts.pending_within_grace, 2);
        assert_eq!(r.counts.matched, 1);
        assert_eq!(r.verdict, Verdict::Breaks);
    }
}

#[test]
fn a_window_backwards_is_an_error() {
    let mut o = day();
    o.since = Some(ts("2026-03-03T00:00:00Z"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut l = MemLedger::new();
    let err = rt
        .block_on(backstop_statement::reconcile(
            &mut l,
            HEADER.as_bytes(),
            &o,
            &mut (),
        ))
        .unwrap_err();
    assert!(err.to_string().contains("after until"), "{err}");
}
