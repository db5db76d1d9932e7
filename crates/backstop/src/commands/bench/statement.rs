//! `backstop bench statement`: `backstop reconcile`'s path (the store's batched key lookups
//! and succeeded-task scan, the streaming statement reader) over a statement of N rows
//! against a ledger of N succeeded tasks, with peak memory.

use super::place::Place;
use super::prefill::{FINISHED_KIND, prefill};
use crate::cli::StatementBenchArgs;
use anyhow::{Context, Result, bail};
use backstop::open_store;
use serde::Serialize;
use std::io::Write;
use std::time::{Duration, Instant};

#[derive(Serialize)]
struct Report {
    store: &'static str,
    rows: usize,
    statement_bytes: u64,
    seconds: f64,
    rows_per_s: f64,
    verdict: String,
    matched: u64,
    /// Peak resident set of the `backstop reconcile` process.
    peak_rss_mb: f64,
}

/// The largest peak resident set of the waited-for children, in MB.
fn children_peak_rss_mb() -> f64 {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_CHILDREN covers waited-for children.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    if rc != 0 {
        return 0.0;
    }
    u.ru_maxrss as f64 / 1024.0
}

pub async fn run(a: StatementBenchArgs, database: Option<String>) -> Result<()> {
    if a.rows == 0 {
        bail!("--rows must be at least 1");
    }
    let r = Place::measure_in(database.as_deref(), async |place| measure(place, &a).await).await?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!(
        "store: {}  statement: {} rows ({:.1} MB) against {} succeeded tasks",
        r.store,
        r.rows,
        r.statement_bytes as f64 / 1e6,
        r.rows
    );
    println!(
        "backstop reconcile: {:.1} s, {:.0} rows/s, verdict {} ({} matched); peak RSS {:.0} MB",
        r.seconds, r.rows_per_s, r.verdict, r.matched, r.peak_rss_mb
    );
    Ok(())
}

async fn measure(place: &Place, a: &StatementBenchArgs) -> Result<Report> {
    let store = open_store(&place.url()).await?;
    let took = prefill(&store, a.rows).await?;
    eprintln!(
        "bench: {} succeeded tasks in {:.1} s",
        a.rows,
        took.as_secs_f64()
    );
    place.settle().await?;
    let dir = tempfile_dir()?;
    let path = dir.join("statement.csv");
    let at = jiff::Timestamp::now();
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path)?);
        writeln!(w, "key,amount,currency,status,at")?;
        for i in 0..a.rows {
            writeln!(w, "done-{i},{},USD,delivered,{at}", 100 + i % 900)?;
        }
        writeln!(w, "#count,{},,,", a.rows)?;
    }
    let bytes = std::fs::metadata(&path)?.len();
    // `backstop reconcile` itself, in a process of its own, so that its peak memory is its own.
    let since = (at - Duration::from_secs(3600)).to_string();
    let until = (at + Duration::from_secs(60)).to_string();
    let t = Instant::now();
    let out = std::process::Command::new(std::env::current_exe()?)
        .args([
            "--database",
            &place.url(),
            "reconcile",
            FINISHED_KIND,
            "--statement",
        ])
        .arg(&path)
        .args([
            "--since", &since, "--until", &until, "--grace", "0s", "--json",
        ])
        .env_remove("BACKSTOP_CONFIG")
        .stderr(std::process::Stdio::inherit())
        .output()?;
    let seconds = t.elapsed().as_secs_f64();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("backstop reconcile printed no report ({})", out.status))?;
    let peak = children_peak_rss_mb();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Report {
        store: place.store(),
        rows: a.rows,
        statement_bytes: bytes,
        seconds,
        rows_per_s: a.rows as f64 / seconds,
        verdict: report["verdict"].as_str().unwrap_or("?").to_string(),
        matched: report["counts"]["matched"].as_u64().unwrap_or(0),
        peak_rss_mb: peak,
    })
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("backstop-bench-statement-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}
