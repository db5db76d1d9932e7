//! `backstop-chaos`: the chaos suite. Runs the real `backstop` binary through the scenarios of
//! a profile (process kills on SQLite and PostgreSQL, backend kills, a PostgreSQL restart, a
//! full disk, a slow and a recovering target) while a client enqueues over HTTP, and prints one
//! row per scenario: acknowledged, lost, duplicated under a second idempotency key, stuck,
//! recovery time. Exits 1 when any row has a loss, a stuck task, a duplicate under a second key
//! or an enqueue never acknowledged; 2 when the harness itself could not run.

mod client;
mod database;
mod fleet;
mod profile;
mod scenario;
mod table;
mod target;
mod verdict;

use anyhow::{Context, bail};
use clap::Parser;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The chaos suite: faults against the real `backstop` binary, and a verdict per scenario.
#[derive(Parser, Debug)]
#[command(name = "backstop-chaos")]
struct Args {
    /// `short` (CI, a few minutes) or `long` (more tasks and faults, MariaDB too).
    #[arg(long, default_value = "short")]
    profile: String,
    /// Run only these scenarios (comma-separated names; see --list).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Leave these scenarios out (comma-separated names), e.g. `pg-restart` on a shared server.
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Print the profile's scenarios and exit.
    #[arg(long)]
    list: bool,
    /// The `backstop` binary (default: `backstop` next to this program, as cargo builds it).
    #[arg(long)]
    backstop: Option<PathBuf>,
    /// The PostgreSQL server the PostgreSQL scenarios use (a fresh schema each).
    #[arg(long, env = "BACKSTOP_TEST_POSTGRES_URL")]
    postgres_url: Option<String>,
    /// The MySQL/MariaDB server of the long profile's MariaDB scenario (a fresh table prefix).
    #[arg(long, env = "BACKSTOP_TEST_MYSQL_URL")]
    mysql_url: Option<String>,
    /// Keep each scenario's directory (process logs, delivery log, SQLite ledger).
    #[arg(long)]
    keep: bool,
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run(args)) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}

/// Runs the selected scenarios; `Ok(false)` when any of them failed.
async fn run(args: Args) -> anyhow::Result<bool> {
    let Some(mut scenarios) = profile::scenarios(&args.profile) else {
        bail!(
            "unknown profile {:?} (known: {})",
            args.profile,
            profile::PROFILES.join(", ")
        );
    };
    for name in args.only.iter().chain(&args.skip) {
        if !scenarios.iter().any(|s| s.name == name) {
            let known: Vec<&str> = scenarios.iter().map(|s| s.name).collect();
            bail!(
                "no scenario {name:?} in the {} profile (known: {})",
                args.profile,
                known.join(", ")
            );
        }
    }
    if !args.only.is_empty() {
        scenarios.retain(|s| args.only.iter().any(|n| n == s.name));
    }
    scenarios.retain(|s| !args.skip.iter().any(|n| n == s.name));
    if args.list {
        for s in &scenarios {
            println!(
                "{:<20} {} x{} {:?}",
                s.name,
                s.backend.name(),
                s.processes,
                s.fault
            );
        }
        return Ok(true);
    }
    let binary = match args.backstop {
        Some(b) => b,
        None => std::env::current_exe()?
            .parent()
            .context("this program has no directory")?
            .join("backstop"),
    };
    if !binary.is_file() {
        bail!(
            "no backstop binary at {} (build it: cargo build --release -p backstop; or pass --backstop PATH)",
            binary.display()
        );
    }
    let ctx = scenario::Context {
        binary,
        servers: database::Servers {
            postgres: args.postgres_url,
            mysql: args.mysql_url,
        },
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .pool_max_idle_per_host(16)
            .build()?,
        keep: args.keep,
    };
    println!(
        "chaos suite, profile {}, {} scenario(s), backstop {}",
        args.profile,
        scenarios.len(),
        ctx.binary.display()
    );
    let began = Instant::now();
    let mut table = table::Table::default();
    table.header();
    for s in &scenarios {
        let started = Instant::now();
        let outcome = scenario::run(s, &ctx).await;
        table.row(s, outcome, started.elapsed());
    }
    let ok = table.summary(began.elapsed());
    Ok(ok)
}
