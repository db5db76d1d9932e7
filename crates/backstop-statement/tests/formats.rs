//! CSV quoting, headers and column maps; JSON lines; status vocabularies.

mod common;

use backstop_statement::{ProviderStatus, Verdict, status::normal_form};
use common::*;

fn ledger() -> MemLedger {
    MemLedger::new()
        .paid("ORD-1", 1050, "2026-03-01T10:00:00Z")
        .paid("ORD,2", 99, "2026-03-01T10:00:00Z")
        .paid("ORD \"3\"", 1, "2026-03-01T10:00:00Z")
}

#[test]
fn csv_with_quoted_fields_a_bom_crlf_and_a_column_map() {
    let text = "\u{feff}Settled At,Order No,Note,Amount Cents,CCY,State\r\n\
                2026-03-01T10:00:01+08:00,ORD-1,\"first, with a comma\",1050,usd,PAID\r\n\
                ,\"ORD,2\",\"multi\r\nline \"\"note\"\"\",\" 99 \",USD,Settled\r\n\
                2026-03-01T10:00:03Z,\"ORD \"\"3\"\"\",,1,USD,ok\r\n";
    let mut o = opts();
    o.read.columns = "key=order no,amount=Amount Cents,currency=ccy,status=State,at=settled at"
        .parse()
        .unwrap();
    let mut l = ledger();
    let r = run(&mut l, text, &o);
    assert_eq!(
        r.verdict,
        Verdict::Reconciled,
        "{:#?} {:#?}",
        r.breaks,
        r.malformed
    );
    assert_eq!(r.counts.matched, 3);
    assert_eq!(r.counts.malformed, 0);
    // The time with an offset is read as the instant it names.
    assert_eq!(r.window.since, Some(ts("2026-03-01T02:00:01Z")));
    assert_eq!(r.window.until, ts("2026-03-01T10:00:03Z"));
    assert_eq!(
        (r.window.since_from, r.window.until_from),
        ("statement", "statement")
    );
}

#[test]
fn line_numbers_follow_quoted_newlines() {
    let text = format!("{HEADER}\"ORD\n-9\",1,USD,paid,\nX,1.5,USD,paid,\n");
    let mut l = ledger();
    let r = run(&mut l, &text, &opts());
    assert_eq!(
        r.breaks.iter().find(|b| b.key == "ORD\n-9").unwrap().line,
        Some(2)
    );
    assert_eq!(r.malformed[0].line, 4);
}

#[test]
fn a_statement_without_a_status_column() {
    let mut o = opts();
    o.read.columns = "status=".parse().unwrap();
    let mut l = MemLedger::new().paid("A", 5, "2026-03-01T10:00:00Z");
    let r = run(&mut l, "key,amount,currency\nA,5,USD\n", &o);
    assert_eq!(r.verdict, Verdict::Reconciled);
    // While a mapped status column must exist.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = rt
        .block_on(backstop_statement::reconcile(
            &mut l,
            "key,amount,currency\nA,5,USD\n".as_bytes(),
            &opts(),
            &mut (),
        ))
        .unwrap_err();
    assert!(err.to_string().contains("no column status"));
}

#[test]
fn status_aliases() {
    let mut o = opts();
    o.read
        .status_aliases
        .insert(normal_form("TRADE_SUCCESS"), ProviderStatus::Succeeded);
    o.read
        .status_aliases
        .insert(normal_form("TRADE_CLOSED"), ProviderStatus::Reversed);
    let mut l =
        MemLedger::new()
            .paid("A", 5, "2026-03-01T10:00:00Z")
            .paid("B", 5, "2026-03-01T10:00:00Z");
    let r = run(
        &mut l,
        &format!("{HEADER}A,5,USD,trade_success,\nB,5,USD,TRADE-CLOSED,\n"),
        &o,
    );
    assert_eq!(classes(&r), ["status_mismatch"]);
    assert_eq!(r.breaks[0].statement_status, Some(ProviderStatus::Reversed));
}

#[test]
fn jsonl_with_integer_keys_escapes_blank_lines_and_extra_fields() {
    let text = "{\"order\":1001,\"cents\":\"1050\",\"ccy\":\"USD\",\"state\":\"paid\",\"meta\":{\"x\":[1,2,{\"y\":null}]}}\r\n\
                \n   \n\
                {\"state\":\"Delivered\",\"ccy\":\"usd\",\"cents\":99,\"order\":\"ORD,2\",\"when\":null}\n\
                {\"ord\\u0065r\":\"ORD \\\"3\\\"\",\"cents\":1,\"ccy\":\"USD\",\"state\":\"ok\",\"when\":\"2026-03-01T10:00:00Z\"}";
    let mut o = jsonl(opts());
    o.read.columns = "key=order,amount=cents,currency=ccy,status=state,at=when"
        .parse()
        .unwrap();
    let mut l = ledger().paid("1001", 1050, "2026-03-01T10:00:00Z");
    l.tasks.remove("ORD-1");
    let r = run(&mut l, text, &o);
    assert_eq!(
        r.verdict,
        Verdict::Reconciled,
        "{:#?} {:#?}",
        r.breaks,
        r.malformed
    );
    assert_eq!(r.counts.matched, 3);
    assert_eq!(r.counts.records_read, 3);
}

#[test]
fn jsonl_line_numbers_count_blank_lines() {
    let text = "\n{\"key\":\"A\"}\n\n{\"key\":\"B\",\"amount\":1,\"currency\":\"USD\",\"status\":\"paid\"}\n";
    let mut l = MemLedger::new();
    let r = run(&mut l, text, &jsonl(opts()));
    assert_eq!(r.malformed[0].line, 2);
    assert_eq!(r.breaks[0].line, Some(4));
}
