//! One module per command.

mod bench;
mod bridges;
mod dead;
mod doctor;
mod enqueue;
mod kinds;
mod limits;
mod migrate;
mod reconcile;
mod schedules;
mod serve;
mod tasks;
mod token;
mod why;

use crate::cli::{Cli, Command};
use anyhow::{Context, Result, bail};
use backstop::config::Config;
use backstop::{DEFAULT_DATABASE, Engine, Store, TaskId};
use std::path::Path;
use std::sync::Arc;

/// What every command starts from.
pub struct Ctx {
    pub config: Config,
    pub database: String,
    /// The command works on a ledger that must already exist (it reads one, or manages its
    /// tasks): a SQLite file that is not there is an error, not a new empty ledger.
    pub needs_ledger: bool,
}

impl Ctx {
    /// Opens and migrates the ledger.
    pub async fn store(&self) -> Result<Arc<dyn Store>> {
        if self.needs_ledger {
            ledger_exists(&self.database)?;
        }
        backstop::open_store(&self.database)
            .await
            .with_context(|| format!("database {}", self.database))
    }

    /// An engine for the configured kinds (used to enqueue with their defaults) and machines.
    pub fn engine(&self, store: Arc<dyn Store>) -> Result<Engine> {
        let mut b = Engine::builder(store)
            .options(self.config.engine.clone())
            .alerts(self.config.alerts.clone());
        for k in &self.config.kinds {
            b = b.kind(k.clone());
        }
        for m in &self.config.machines {
            b = b.machine(m.clone());
        }
        for bridge in &self.config.bridges {
            b = b.bridge(bridge.clone());
        }
        for s in &self.config.schedules {
            b = b.schedule(s.clone());
        }
        for s in &self.config.sources {
            b = b.source(
                s.build()
                    .map_err(|e| anyhow::anyhow!("sources.{:?}: {e}", s.name))?,
            );
        }
        Ok(b.build()?)
    }
}

pub async fn run(cli: Cli) -> Result<()> {
    let config = match &cli.config {
        Some(path) => Config::load(path)?,
        None if Path::new("backstop.toml").exists() => Config::load(Path::new("backstop.toml"))?,
        None => Config::default(),
    };
    let database = cli
        .database
        .clone()
        .or_else(|| config.database.clone())
        .unwrap_or_else(|| DEFAULT_DATABASE.to_string());
    let ctx = Ctx {
        config,
        database,
        needs_ledger: cli.command.needs_ledger(),
    };
    match cli.command {
        Command::Serve(a) => serve::run(&ctx, a).await,
        Command::Enqueue(a) => enqueue::run(&ctx, a).await,
        Command::Tasks(c) => tasks::run(&ctx, c).await,
        Command::Dead(c) => dead::run(&ctx, c).await,
        Command::Bridges(c) => bridges::run(&ctx, c).await,
        Command::Schedules(c) => schedules::run(&ctx, c).await,
        Command::Kinds(c) => kinds::run(&ctx, c).await,
        Command::Limits(c) => limits::run(&ctx, c).await,
        Command::Migrate => migrate::run(&ctx).await,
        Command::Reconcile(a) => reconcile::run(&ctx, a).await,
        Command::Why { id } => why::run(&ctx, &id).await,
        Command::Doctor { json } => doctor::run(&ctx, json).await,
        Command::Bench(a) => bench::run(&ctx, cli.database.clone(), a).await,
        Command::Token(c) => token::run(c),
    }
}

/// Opening a SQLite file creates it: for a command that reads the ledger, a wrong path or
/// working directory would print an empty answer from a new empty ledger instead of saying
/// that there is none. Servers (PostgreSQL, MySQL) are left to their own errors.
fn ledger_exists(database: &str) -> Result<()> {
    if !database.starts_with("sqlite:") {
        return Ok(());
    }
    let path = backstop_store_sqlite::SqliteOptions::from_url(database)?.path;
    if !path.exists() {
        bail!(
            "there is no ledger at {} ({database}): give the ledger with --database (or BACKSTOP_DATABASE_URL), \
             or run this where `backstop serve` keeps it",
            path.display()
        );
    }
    Ok(())
}

/// Parses a task id given on the command line.
pub fn task_id(s: &str) -> Result<TaskId> {
    match s.parse() {
        Ok(id) => Ok(id),
        Err(_) => bail!("{s:?} is not a task id (expected a UUID such as 0193a5c2-…)"),
    }
}

/// Prints a value as one line of JSON.
pub fn print_json(v: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string(v)?);
    Ok(())
}
