//! Malformed rows are counted and listed, never dropped; declared counts and totals make a
//! short or inconsistent statement INCOMPLETE.

mod common;

use backstop_statement::{Verdict, reconcile};
use common::*;

fn ledger() -> MemLedger {
    MemLedger::new()
        .paid("A", 10, "2026-03-01T10:00:00Z")
        .paid("B", 20, "2026-03-01T10:00:00Z")
        .paid("C", 30, "2026-03-01T10:00:00Z")
}

#[test]
fn csv_malformed_rows_are_counted_and_listed_with_reasons() {
    let mut text = format!(
        "{HEADER}A,10,USD,paid,\n\
         ,5,USD,paid,\n\
         B,,USD,paid,\n\
         C,1e3,USD,paid,\n\
         D,5,U$D,paid,\n\
         E,5,USD,maybe,\n\
         F,5,USD,paid,yesterday\n\
         G,5,USD\n\
         H,5,USD,paid,,extra\n"
    )
    .into_bytes();
    text.extend_from_slice(b"I,5,\xff\xfe,paid,\n");
    let mut l = ledger();
    let r = run_bytes(&mut l, &text, &opts());
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert_eq!(r.counts.records_read, 10);
    assert_eq!(r.counts.well_formed, 1);
    assert_eq!(r.counts.malformed, 9);
    let reasons: Vec<(u64, &str)> = r
        .malformed
        .iter()
        .map(|m| (m.line, m.reason.as_str()))
        .collect();
    let expect = [
        (3, "key is empty"),
        (4, "amount is empty"),
        (5, "exponent"),
        (6, "not a currency code"),
        (7, "unknown status \"maybe\""),
        (8, "not an RFC 3339 timestamp"),
        (9, "expected 5 fields as in the header, found 3"),
        (10, "found 6"),
        (11, "currency is not valid UTF-8"),
    ];
    assert_eq!(reasons.len(), expect.len());
    for ((line, reason), (want_line, want)) in reasons.iter().zip(expect) {
        assert_eq!(*line, want_line);
        assert!(
            reason.contains(want),
            "line {line}: {reason:?} lacks {want:?}"
        );
    }
    assert_eq!(r.malformed[1].key.as_deref(), Some("B"));
    assert_eq!(r.malformed[3].excerpt, "D,5,U$D,paid,");
    // B and C have readable keys: not reported missing as well.
    assert_eq!(r.counts.missing_record, 0);
    assert!(r.incomplete_reasons[0].contains("9 row(s) could not be read"));
}

#[test]
fn jsonl_malformed_lines_are_counted_and_listed() {
    let text = r#"{"key":"A","amount":10,"currency":"USD","status":"paid"}
not json
["A",10]
{"key":"B","currency":"USD","status":"paid"}
{"key":"C","amount":30,"amount":31,"currency":"USD","status":"paid"}
{"key":"D","amount":5,"currency":"USD","status":7}
{"key":{"id":1},"amount":5,"currency":"USD","status":"paid"}
{"key":"E","amount":5,"currency":"USD","status":"paid"} trailing
{"key":"F","amount":5,"currency":"USD","status":"paid","at":"2026-13-01T00:00:00Z"}
{"key":"G","amount":5,"currency":"USD","status":"paid"
"#;
    let mut l = ledger();
    let r = run(&mut l, text, &jsonl(opts()));
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert_eq!(r.counts.records_read, 10);
    assert_eq!(r.counts.malformed, 9);
    let lines: Vec<u64> = r.malformed.iter().map(|m| m.line).collect();
    assert_eq!(lines, [2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert!(
        r.malformed[2]
            .reason
            .contains("\"amount\" (amount) is missing"),
        "{}",
        r.malformed[2].reason
    );
    assert!(r.malformed[3].reason.contains("appears twice"));
    assert!(r.malformed[4].reason.contains("status must be a string"));
    assert!(
        r.malformed[5]
            .reason
            .contains("key must be a string or an integer")
    );
    assert_eq!(r.malformed[0].excerpt, "not json");
}

#[test]
fn csv_declared_count_and_total() {
    let data = "A,10,USD,paid,\nB,20,USD,paid,\nC,30,USD,paid,\n";
    let cases = [
        // (declaration rows, verdict)
        ("#count,3,,,\n#amount_total,60,,,\n", Verdict::Reconciled),
        ("#count,4,,,\n", Verdict::Incomplete),
        ("#count,2,,,\n", Verdict::Incomplete),
        ("#amount_total,61,,,\n", Verdict::Incomplete),
        ("#count,three,,,\n", Verdict::Incomplete),
    ];
    for (trailer, want) in cases {
        let mut l = ledger();
        let r = run(&mut l, &format!("{HEADER}{data}{trailer}"), &opts());
        assert_eq!(r.verdict, want, "{trailer}: {:?}", r.incomplete_reasons);
    }
    let mut l = ledger();
    let r = run(&mut l, &format!("{HEADER}{data}#count,4,,,\n"), &opts());
    assert_eq!(r.declared.unwrap().count, Some(4));
    assert_eq!(
        r.incomplete_reasons,
        ["the statement declares 4 rows but has 3"]
    );
}

#[test]
fn a_header_declaration_catches_truncation_a_trailer_cannot() {
    let mut l = ledger();
    // Declared before the data: the file lost its last row.
    let r = run(
        &mut l,
        &format!("{HEADER}#count,3,,,\nA,10,USD,paid,\nB,20,USD,paid,\n"),
        &opts(),
    );
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert_eq!(r.counts.missing_record, 1);

    // A trailer lost with the end of the file is noticed only when a count is required.
    let mut o = opts();
    o.require_count = true;
    let mut l = ledger();
    let r = run(
        &mut l,
        &format!("{HEADER}A,10,USD,paid,\nB,20,USD,paid,\n"),
        &o,
    );
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert!(r.incomplete_reasons[0].contains("declares no row count"));
}

#[test]
fn data_after_the_trailer_is_malformed() {
    let mut l = ledger();
    let text = format!("{HEADER}A,10,USD,paid,\n#count,1,,,\nB,20,USD,paid,\nC,30,USD,paid,\n");
    let r = run(&mut l, &text, &opts());
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert_eq!(r.counts.malformed, 2);
    assert_eq!(r.malformed[0].reason, "data row after the trailer");
    assert_eq!(r.malformed[0].key.as_deref(), Some("B"));
}

#[test]
fn jsonl_trailer() {
    let data = r#"{"key":"A","amount":10,"currency":"USD","status":"paid"}
{"key":"B","amount":20,"currency":"USD","status":"paid"}
{"key":"C","amount":30,"currency":"USD","status":"paid"}
"#;
    let mut l = ledger();
    let r = run(
        &mut l,
        &format!("{data}{{\"_trailer\":{{\"count\":3,\"amount_total\":60}}}}\n"),
        &jsonl(opts()),
    );
    assert_eq!(r.verdict, Verdict::Reconciled, "{:?}", r.incomplete_reasons);
    let mut l = ledger();
    let r = run(
        &mut l,
        &format!("{data}{{\"_trailer\":{{\"count\":5}}}}\n"),
        &jsonl(opts()),
    );
    assert_eq!(r.verdict, Verdict::Incomplete);
    let mut l = ledger();
    let r = run(
        &mut l,
        &format!("{data}{{\"_trailer\":{{\"count\":3,\"amount_total\":6.0}}}}\n"),
        &jsonl(opts()),
    );
    assert_eq!(r.verdict, Verdict::Incomplete);
    let mut l = ledger();
    let r = run(
        &mut l,
        &format!("{{\"_trailer\":{{\"count\":3}}}}\n{data}{{\"key\":\"Z\"}}\n"),
        &jsonl(opts()),
    );
    assert_eq!(r.counts.malformed, 1);
    assert_eq!(r.counts.records_read, 4);
}

#[test]
fn a_truncated_jsonl_line_is_malformed() {
    let text = "{\"key\":\"A\",\"amount\":10,\"currency\":\"USD\",\"status\":\"paid\"}\n{\"key\":\"B\",\"amount\":20,\"curr";
    let mut l = ledger();
    let r = run(&mut l, text, &jsonl(opts()));
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert_eq!(r.counts.malformed, 1);
}

#[test]
fn expected_count() {
    let mut o = opts();
    o.expect_count = Some(3);
    let mut l = ledger();
    let r = run(
        &mut l,
        &format!("{HEADER}A,10,USD,paid,\nB,20,USD,paid,\nC,30,USD,paid,\n"),
        &o,
    );
    assert_eq!(r.verdict, Verdict::Reconciled);
    o.expect_count = Some(1_000);
    let mut l = ledger();
    let r = run(
        &mut l,
        &format!("{HEADER}A,10,USD,paid,\nB,20,USD,paid,\nC,30,USD,paid,\n"),
        &o,
    );
    assert_eq!(r.verdict, Verdict::Incomplete);
    assert_eq!(
        r.incomplete_reasons,
        ["1000 rows were expected but the statement has 3"]
    );
}

#[test]
fn an_unusable_header_is_an_error_not_a_report() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut l = ledger();
    let err = rt
        .block_on(reconcile(
            &mut l,
            "id,amount,currency,status\nA,1,USD,paid\n".as_bytes(),
            &opts(),
            &mut (),
        ))
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("no column key") && msg.contains("--map key=COLUMN"),
        "{msg}"
    );
    let err = rt
        .block_on(reconcile(&mut l, "".as_bytes(), &opts(), &mut ()))
        .unwrap_err();
    assert!(err.to_string().contains("no column key"));
    // An explicitly mapped time column must exist; the default one may be absent.
    let mut o = opts();
    o.read.columns = "at=when".parse().unwrap();
    assert!(
        rt.block_on(reconcile(
            &mut l,
            "key,amount,currency,status\n".as_bytes(),
            &o,
            &mut ()
        ))
        .is_err()
    );
    let r = rt
        .block_on(reconcile(
            &mut l,
            "key,amount,currency,status\nA,10,USD,paid\n".as_bytes(),
            &opts(),
            &mut (),
        ))
        .unwrap();
    assert_eq!(r.counts.matched, 1);
}
