//! `backstop reconcile KIND --statement FILE`: a provider's statement against the ledger.

use super::Ctx;
use crate::cli::ReconcileArgs;
use anyhow::{Context, Result};
use backstop_engine::statement::{self, AmountPointers, StatementJob};
use backstop_statement::{
    ColumnMap, Observer, Options, Phase, Progress, ReadOptions, ReportDir, StatementFormat,
    Verdict, summary,
};
use std::io::{IsTerminal, Write};

/// Exit codes beyond 0 (reconciled, with or without pending items) and 1 (an error).
const EXIT_BREAKS: i32 = 3;
const EXIT_INCOMPLETE: i32 = 4;

pub async fn run(ctx: &Ctx, a: ReconcileArgs) -> Result<()> {
    // Checked before anything is recorded: a misspelled kind is a mistake, not a run.
    if !ctx.config.kinds.iter().any(|k| k.name == a.kind) {
        let known: Vec<&str> = ctx.config.kinds.iter().map(|k| k.name.as_str()).collect();
        anyhow::bail!(
            "unknown kind {:?}: configured kinds are {}",
            a.kind,
            if known.is_empty() {
                "none (give --config)".to_string()
            } else {
                known.join(", ")
            }
        );
    }
    let default_currency = a
        .currency
        .as_deref()
        .map(backstop_statement::parse_currency)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--currency: {e}"))?;
    let format = match &a.format {
        Some(f) => f.parse::<StatementFormat>()?,
        None => StatementFormat::guess_from_path(&a.statement),
    };
    let columns = match &a.map {
        Some(m) => m.parse::<ColumnMap>()?,
        None => ColumnMap::default(),
    };
    let file = a.statement.display().to_string();
    let input = std::fs::File::open(&a.statement)
        .with_context(|| format!("cannot read the statement {file}"))?;
    let size = input.metadata().map(|m| m.len()).unwrap_or(0);
    let store = ctx.store().await?;
    let mut options = Options::new(a.kind.clone(), jiff::Timestamp::now());
    options.read = ReadOptions {
        format,
        columns,
        ..ReadOptions::default()
    };
    options.since = a.since;
    options.until = a.until;
    options.grace = a.grace;
    options.expect_count = a.expect_count;
    // Bigger pages than the library's default: fewer statements, same memory bound.
    options.chunk_size = 20_000;
    options.scan_page = 20_000;
    let run_id = std::fs::File::open(&a.statement)
        .and_then(|f| statement::run_id(&statement::run_params(&options, a.expect_count), f))
        .with_context(|| format!("cannot read the statement {file}"))?;
    let job = StatementJob {
        run_id: run_id.clone(),
        statement: file.clone(),
        options,
        pointers: AmountPointers {
            amount: a.amount_pointer.clone(),
            currency: a.currency_pointer.clone(),
            default_currency,
        },
        apply: a.apply,
    };
    let mut bar = Bar::new(size);
    let input = std::io::BufReader::with_capacity(1 << 16, input);
    let outcome = match &a.report {
        Some(dir) => {
            let mut files = ReportDir::create(dir)
                .with_context(|| format!("cannot write the report to {}", dir.display()))?;
            let o = statement::run(store.clone(), job, input, &mut (&mut bar, &mut files)).await?;
            files.finish(&o.report)?;
            o
        }
        None => statement::run(store.clone(), job, input, &mut bar).await?,
    };
    bar.clear();
    let r = &outcome.report;
    if a.json {
        println!("{}", serde_json::to_string(r)?);
    } else {
        print!("{}", summary(r));
        println!("run {run_id}");
        if a.apply {
            match r.verdict {
                Verdict::Incomplete => println!("applied nothing: the statement is incomplete"),
                _ => println!(
                    "re-driven {} missing task(s) now; {} already re-driven by this run or running again",
                    outcome.redriven, outcome.skipped
                ),
            }
        }
        if let Some(dir) = &a.report {
            println!("report in {}", dir.display());
        }
    }
    if r.verdict == Verdict::Breaks {
        let mut alert = backstop_engine::alerts::AlertEvent::new(
            backstop_engine::alerts::AlertName::StatementBreaks,
            format!(
                "statement {file}: {} break(s), run {run_id}",
                r.counts.breaks
            ),
        );
        alert.kind = Some(a.kind.clone());
        if let Err(e) = ctx.engine(store)?.send_alert(alert).await {
            eprintln!("warning: could not record the statement.breaks alert: {e}");
        }
    }
    std::io::stdout().flush()?;
    match r.verdict {
        Verdict::Breaks => std::process::exit(EXIT_BREAKS),
        Verdict::Incomplete => std::process::exit(EXIT_INCOMPLETE),
        _ => Ok(()),
    }
}

/// A progress bar on stderr when it is a terminal; nothing otherwise.
struct Bar {
    size: u64,
    on: bool,
    last: std::time::Instant,
}

impl Bar {
    fn new(size: u64) -> Bar {
        Bar {
            size,
            on: std::io::stderr().is_terminal(),
            last: std::time::Instant::now(),
        }
    }

    fn clear(&self) {
        if self.on {
            eprint!("\r\x1b[2K");
        }
    }
}

impl Observer for Bar {
    fn on_progress(&mut self, p: &Progress) {
        if !self.on || self.last.elapsed().as_millis() < 100 {
            return;
        }
        self.last = std::time::Instant::now();
        let line = match p.phase {
            Phase::Statement => {
                let share = p.bytes_read as f64 / self.size.max(1) as f64;
                let filled = ((share * 30.0) as usize).min(30);
                format!(
                    "statement [{}{}] {:>3.0}%  {} rows",
                    "#".repeat(filled),
                    " ".repeat(30 - filled),
                    share * 100.0,
                    p.rows
                )
            }
            Phase::LedgerScan => format!("ledger scan: {} succeeded tasks", p.ledger_scanned),
            Phase::Done => String::new(),
        };
        eprint!("\r\x1b[2K{line}");
    }
}
