//! Large statements stream in bounded chunks; a report directory gets every break however
//! many the JSON lists; progress is reported.

mod common;

#[path = "common/synthetic.rs"]
mod synthetic;

use backstop_statement::{
    BreakClass, Observer, OnProgress, Options, Phase, Progress, ReportDir, Verdict, reconcile,
};
use common::*;
use synthetic::{CsvGen, SynthLedger, planted_count};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

#[test]
fn a_large_generated_statement_streams_in_chunks() {
    let n = 200_000;
    let mut ledger = SynthLedger::new(n);
    let mut o = Options::new("pay.charge", ts("2026-03-02T12:00:00Z"));
    o.grace = std::time::Duration::ZERO;
    let mut progress: Vec<Progress> = Vec::new();
    let mut obs = OnProgress(|p: &Progress| progress.push(*p));
    let r = rt()
        .block_on(reconcile(&mut ledger, CsvGen::new(n), &o, &mut obs))
        .unwrap();
    let k = planted_count(n);
    assert_eq!(k, 4);
    for class in [
        BreakClass::AmountMismatch,
        BreakClass::StatusMismatch,
        BreakClass::OrphanRecord,
        BreakClass::MissingRecord,
        BreakClass::DuplicateRecord,
    ] {
        assert_eq!(r.counts.of(class), k, "{class}");
    }
    assert_eq!(r.counts.pending_within_grace, 0);
    assert_eq!(r.counts.records_read, CsvGen::rows(n));
    assert_eq!(r.counts.malformed, 0);
    assert_eq!(r.counts.matched, n - 4 * k);
    assert_eq!(r.counts.ledger_scanned, n - k);
    assert_eq!(r.verdict, Verdict::Breaks);
    assert!(
        r.incomplete_reasons.is_empty(),
        "{:?}",
        r.incomplete_reasons
    );
    assert!(ledger.largest_lookup <= 5_000);
    // Progress: every chunk of the statement, then the scan, then done; bytes only grow.
    let statement: Vec<_> = progress
        .iter()
        .filter(|p| p.phase == Phase::Statement)
        .collect();
    assert!(statement.len() >= 40, "{}", statement.len());
    assert!(
        statement
            .windows(2)
            .all(|w| w[0].bytes_read <= w[1].bytes_read)
    );
    assert_eq!(progress.last().unwrap().phase, Phase::Done);
    assert_eq!(progress.last().unwrap().ledger_scanned, n - k);
}

/// Counts what it sees, to check nothing was withheld.
#[derive(Default)]
struct Tally {
    breaks: u64,
    malformed: u64,
}

impl Observer for Tally {
    fn on_break(&mut self, _: &backstop_statement::Break) -> std::io::Result<()> {
        self.breaks += 1;
        Ok(())
    }
    fn on_malformed(&mut self, _: &backstop_statement::MalformedRow) -> std::io::Result<()> {
        self.malformed += 1;
        Ok(())
    }
}

#[test]
fn report_directory_has_every_break_while_the_json_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    let mut ledger = MemLedger::new();
    for i in 0..50 {
        ledger = ledger.paid(&format!("T{i}"), 10, "2026-03-01T10:00:00Z");
    }
    let mut text = String::from(HEADER);
    for i in 0..30 {
        text.push_str(&format!("O{i},5,USD,paid,\n"));
    }
    text.push_str("bad,1.5,USD,paid,\nworse,1,USD,paid,\"not, a time\"\n");
    let mut o = opts();
    o.list_limit = 10;
    let mut out = ReportDir::create(&dir.path().join("nested/report")).unwrap();
    let mut tally = Tally::default();
    let r = rt()
        .block_on(reconcile(
            &mut ledger,
            text.as_bytes(),
            &o,
            &mut (&mut out, &mut tally),
        ))
        .unwrap();
    let files = out.finish(&r).unwrap();
    assert_eq!(r.counts.breaks, 80);
    assert_eq!((tally.breaks, tally.malformed), (80, 2));
    assert_eq!(r.breaks.len(), 10);
    assert!(r.breaks_truncated);
    assert!(!r.malformed_truncated);

    let mut csv = csv::Reader::from_path(&files.breaks_csv).unwrap();
    assert_eq!(csv.headers().unwrap().iter().next(), Some("class"));
    let rows: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 80);
    assert_eq!(&rows[0][0], "orphan_record");
    assert_eq!(&rows[79][0], "missing_record");
    assert_eq!(rows[79][2].len(), 36, "a task id");
    assert_eq!((&rows[79][5], &rows[79][6]), ("10", "USD"));
    let malformed = std::fs::read_to_string(&files.malformed_csv).unwrap();
    assert!(
        malformed.contains("\"worse,1,USD,paid,\"\"not, a time\"\"\""),
        "{malformed}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files.json).unwrap()).unwrap();
    assert_eq!(json["verdict"], "INCOMPLETE");
    assert_eq!(json["counts"]["orphan_record"], 30);
    assert_eq!(json["counts"]["missing_record"], 50);
    assert_eq!(json["breaks"].as_array().unwrap().len(), 10);
    assert_eq!(json["breaks_truncated"], true);
    assert_eq!(json["malformed"][0]["line"], 32);

    let summary = std::fs::read_to_string(&files.summary).unwrap();
    assert!(
        summary.starts_with("reconcile pay.charge: INCOMPLETE\n"),
        "{summary}"
    );
    assert!(summary.contains("missing_record 50"), "{summary}");
    assert!(summary.contains("USD: statement gross 150"), "{summary}");
    assert!(summary.contains("breaks.csv has all"), "{summary}");
}

/// A tokio caller can spawn the run: its future is `Send` when the ledger, the input and
/// the observer are.
#[test]
fn the_run_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let mut ledger = MemLedger::new();
    let o = opts();
    let mut out = ReportDir::create(tempfile::tempdir().unwrap().path()).unwrap();
    let fut = reconcile(&mut ledger, std::io::empty(), &o, &mut out);
    assert_send(&fut);
}
