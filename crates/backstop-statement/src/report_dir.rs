//! Writes a report directory: `report.json`, `breaks.csv` and `malformed.csv` (streamed as
//! the run finds them, so every one is on disk however many), and `summary.txt`.

use crate::classify::Break;
use crate::money::Money;
use crate::observer::Observer;
use crate::record::MalformedRow;
use crate::report::Report;
use crate::summary::summary;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The header of `breaks.csv`.
pub const BREAKS_CSV_HEADER: [&str; 13] = [
    "class",
    "key",
    "task_id",
    "line",
    "ledger_status",
    "ledger_amount",
    "ledger_currency",
    "finished_at",
    "statement_status",
    "statement_amount",
    "statement_currency",
    "at",
    "detail",
];

/// The header of `malformed.csv`.
pub const MALFORMED_CSV_HEADER: [&str; 4] = ["line", "key", "reason", "excerpt"];

/// The files of a written report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportFiles {
    /// `report.json`.
    pub json: PathBuf,
    /// `breaks.csv`: every break and pending item.
    pub breaks_csv: PathBuf,
    /// `malformed.csv`: every malformed row.
    pub malformed_csv: PathBuf,
    /// `summary.txt`.
    pub summary: PathBuf,
}

/// A report directory being written: an [`Observer`] during the run, then
/// [`ReportDir::finish`] with the report.
pub struct ReportDir {
    files: ReportFiles,
    breaks: csv::Writer<BufWriter<File>>,
    malformed: csv::Writer<BufWriter<File>>,
}

impl ReportDir {
    /// Creates `dir` (and its parents) and starts the CSV files; existing report files in it
    /// are replaced.
    pub fn create(dir: &Path) -> io::Result<ReportDir> {
        fs::create_dir_all(dir)?;
        let files = ReportFiles {
            json: dir.join("report.json"),
            breaks_csv: dir.join("breaks.csv"),
            malformed_csv: dir.join("malformed.csv"),
            summary: dir.join("summary.txt"),
        };
        let open = |p: &Path| -> io::Result<csv::Writer<BufWriter<File>>> {
            Ok(csv::Writer::from_writer(BufWriter::new(File::create(p)?)))
        };
        let mut breaks = open(&files.breaks_csv)?;
        breaks
            .write_record(BREAKS_CSV_HEADER)
            .map_err(io::Error::from)?;
        let mut malformed = open(&files.malformed_csv)?;
        malformed
            .write_record(MALFORMED_CSV_HEADER)
            .map_err(io::Error::from)?;
        Ok(ReportDir {
            files,
            breaks,
            malformed,
        })
    }

    /// Flushes the CSV files and writes `report.json` and `summary.txt`.
    pub fn finish(mut self, report: &Report) -> io::Result<ReportFiles> {
        self.breaks.flush()?;
        self.malformed.flush()?;
        let mut json = BufWriter::new(File::create(&self.files.json)?);
        serde_json::to_writer_pretty(&mut json, report)?;
        json.write_all(b"\n")?;
        json.flush()?;
        fs::write(&self.files.summary, summary(report))?;
        Ok(self.files)
    }
}

fn money_cells(m: &Option<Money>) -> (String, String) {
    match m {
        Some(m) => (m.minor.to_string(), m.currency.clone()),
        None => (String::new(), String::new()),
    }
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(String::new, T::to_string)
}

impl Observer for ReportDir {
    fn on_break(&mut self, b: &Break) -> io::Result<()> {
        let (la, lc) = money_cells(&b.ledger_amount);
        let (sa, sc) = money_cells(&b.statement_amount);
        let time = |t: &Option<jiff::Timestamp>| {
            t.map_or_else(String::new, backstop_core::wire_time::format)
        };
        self.breaks
            .write_record([
                b.class.as_str(),
                &b.key,
                &opt(&b.task_id),
                &opt(&b.line),
                &opt(&b.ledger_status),
                &la,
                &lc,
                &time(&b.finished_at),
                &opt(&b.statement_status),
                &sa,
                &sc,
                &time(&b.at),
                &b.detail,
            ])
            .map_err(io::Error::from)
    }

    fn on_malformed(&mut self, m: &MalformedRow) -> io::Result<()> {
        self.malformed
            .write_record([
                m.line.to_string().as_str(),
                m.key.as_deref().unwrap_or(""),
                &m.reason,
                &m.excerpt,
            ])
            .map_err(io::Error::from)
    }
}
