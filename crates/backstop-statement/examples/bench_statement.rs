//! Measures a reconciliation over a large statement: writes an N-row statement (default
//! 1,000,000) to a temporary file, reconciles it against a ledger computed from the row
//! number (so the ledger costs no memory here: in production it is the database), writes a
//! report directory, and prints rows/s and the peak resident memory (VmHWM).
//!
//! ```text
//! cargo run --release -p backstop-statement --example bench_statement -- [ROWS] [csv|jsonl]
//! ```

#[path = "../tests/common/synthetic.rs"]
mod synthetic;

use backstop_statement::{
    OnProgress, Options, Phase, Progress, ReportDir, StatementFormat, reconcile, summary,
};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::time::Instant;
use synthetic::{CsvGen, SynthLedger};

fn vm(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .map(|l| l[field.len()..].trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let format: StatementFormat = args
        .next()
        .map_or(Ok(StatementFormat::Csv), |a| a.parse())?;

    let dir = tempfile::tempdir()?;
    let path = dir.path().join(format!("statement.{format}"));
    let started = Instant::now();
    let mut generator = match format {
        StatementFormat::Csv => CsvGen::new(n),
        StatementFormat::Jsonl => CsvGen::jsonl(n),
    };
    std::io::copy(&mut generator, &mut BufWriter::new(File::create(&path)?))?;
    let size = std::fs::metadata(&path)?.len();
    println!(
        "statement: {n} rows, {:.1} MB {format}, written in {:.2?}; VmHWM before: {}",
        size as f64 / 1e6,
        started.elapsed(),
        vm("VmHWM:")
    );

    let mut ledger = SynthLedger::new(n);
    let mut opts = Options::new("pay.charge", jiff::Timestamp::now());
    opts.read.format = format;
    let mut out = ReportDir::create(&dir.path().join("report"))?;
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let started = Instant::now();
    let input = BufReader::with_capacity(256 * 1024, File::open(&path)?);
    let mut statement_done = None;
    let mut phases = OnProgress(|p: &Progress| {
        if p.phase != Phase::Statement && statement_done.is_none() {
            statement_done = Some(started.elapsed());
        }
    });
    let report = rt.block_on(reconcile(
        &mut ledger,
        input,
        &opts,
        &mut (&mut out, &mut phases),
    ))?;
    out.finish(&report)?;
    let elapsed = started.elapsed();
    if let Some(t) = statement_done {
        println!(
            "statement pass (read, look up, classify): {t:.2?}; ledger scan and report: {:.2?}",
            elapsed - t
        );
    }
    let rows = report.counts.records_read;
    println!(
        "reconciled {rows} rows in {elapsed:.2?}: {:.0} rows/s, {:.0} MB/s; {} lookups of at most {} keys",
        rows as f64 / elapsed.as_secs_f64(),
        size as f64 / 1e6 / elapsed.as_secs_f64(),
        ledger.lookups,
        ledger.largest_lookup
    );
    println!(
        "peak memory (VmHWM): {}; VmRSS now: {}",
        vm("VmHWM:"),
        vm("VmRSS:")
    );
    print!("{}", summary(&report));
    Ok(())
}
