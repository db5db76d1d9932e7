//! `backstop bench`: throughput on this machine. `ledger` (the default) measures the ledger
//! with an in-process handler; `http` measures the HTTP API and push delivery on loopback;
//! `hooks` measures inbound callbacks (latency at a fixed rate, sustained throughput);
//! `brokers` measures bridges and broker targets next to their clients' raw ceilings;
//! `schedules` the planner; `checkpoints` one checkpoint's latency.

mod brokers;
mod checkpoints;
mod groups;
mod hooks;
mod http;
mod ledger;
mod load;
mod place;
mod prefill;
mod reconciler;
mod schedules;
mod sink;
mod statement;

use super::Ctx;
use crate::cli::{BenchArgs, BenchCommand};
use anyhow::Result;

/// Runs `engine` on a task of its own until the returned sender fires (or is dropped); the
/// handle ends when the engine has stopped.
fn run_engine(
    engine: &backstop::Engine,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let engine = engine.clone();
    let runner = tokio::spawn(async move {
        engine
            .run(async {
                let _ = stopped.await;
            })
            .await
    });
    (stop, runner)
}

/// Runs the chosen bench, on a fresh temporary SQLite file unless the ledger bench is given
/// a server with `--database` on the command line (`database`: the flag's value).
pub async fn run(_ctx: &Ctx, database: Option<String>, a: BenchArgs) -> Result<()> {
    // Only the flag, not BACKSTOP_DATABASE_URL or the config file: a bench writes hundreds of
    // thousands of tasks and must not land on a production server by default.
    let flagged = std::env::args().any(|a| a == "--database" || a.starts_with("--database="));
    let database = database.filter(|_| flagged);
    match a.command {
        None => ledger::run(ledger::with_database(a.ledger, database)).await,
        Some(BenchCommand::Ledger(l)) => ledger::run(ledger::with_database(l, database)).await,
        Some(BenchCommand::Http(h)) => http::run(h).await,
        Some(BenchCommand::Hooks(h)) => hooks::run(h).await,
        Some(BenchCommand::Reconciler(r)) => reconciler::run(r, database).await,
        Some(BenchCommand::Statement(s)) => statement::run(s, database).await,
        Some(BenchCommand::Brokers(b)) => brokers::run(b).await,
        Some(BenchCommand::Schedules(s)) => schedules::run(s, database).await,
        Some(BenchCommand::Checkpoints(c)) => checkpoints::run(c, database).await,
        Some(BenchCommand::Groups(c)) => groups::run(c, database).await,
    }
}
