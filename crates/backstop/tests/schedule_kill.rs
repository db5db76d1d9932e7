//! A one-second schedule planned by three `backstop serve` processes on one PostgreSQL schema
//! and on one MariaDB/MySQL prefix, one of them SIGKILLed (and started again) every
//! `KILL_EVERY`: in the end every instant from the first row to the last has exactly one row,
//! none missing, none twice. The same with one process on SQLite, SIGKILLed and restarted.
//!
//! The server-backed variants need `BACKSTOP_TEST_POSTGRES_URL` / `BACKSTOP_TEST_MYSQL_URL`;
//! without them they say `skipped:` and pass. The three run at once (one test binary).

mod common;

use backstop_core::schedule::instant_of;
use backstop_core::store::{ListParams, SchedulesParams};
use common::db::{Server, TestDb};
use common::*;
use jiff::Timestamp;
use std::collections::HashSet;
use std::time::{Duration, Instant};

const KIND: &str = "tick.run";
const NAME: &str = "every-second";

/// How long the processes run, and how often one is killed.
fn timing() -> (Duration, Duration) {
    let secs = |var: &str, default: u64| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Duration::from_secs(default), Duration::from_secs)
    };
    (
        secs("BACKSTOP_SCHEDULE_KILL_SECS", 120),
        secs("BACKSTOP_SCHEDULE_KILL_EVERY_SECS", 30),
    )
}

fn config(db: &str) -> String {
    // A pull kind nobody leases: the rows are what is checked. `allow`, or each tick would be
    // skipped as overlapping its pending predecessor (rows all the same, but noisier).
    format!(
        "database = \"{db}\"\n\
         [engine]\npoll_interval = \"50ms\"\ngrace = \"500ms\"\n\
         leader_lease = \"3s\"\nleader_renew = \"300ms\"\n\
         [kinds.\"{KIND}\"]\ntarget = \"pull\"\n\
         [schedules.{NAME}]\ncron = \"* * * * * *\"\nseconds = true\nkind = \"{KIND}\"\n\
         overlap = \"allow\"\n"
    )
}

async fn run_and_kill(db_url: String, processes: usize) {
    let (run_for, kill_every) = timing();
    let dirs: Vec<Workdir> = (0..processes)
        .map(|_| Workdir::new(&config(&db_url)))
        .collect();
    let mut serves: Vec<_> = dirs.iter().map(|w| w.serve()).collect();
    for w in &dirs {
        w.wait_started(1).await;
    }
    let began = Instant::now();
    let mut kills = 0;
    let mut next = 0;
    while began.elapsed() < run_for {
        tokio::time::sleep(kill_every.min(run_for.saturating_sub(began.elapsed()))).await;
        if began.elapsed() >= run_for {
            break;
        }
        let victim = next % processes;
        next += 1;
        signal(&serves[victim], libc::SIGKILL);
        assert!(!serves[victim].wait().await.unwrap().success(), "killed");
        kills += 1;
        let started = dirs[victim].serve_log().matches("engine started").count();
        serves[victim] = dirs[victim].serve();
        dirs[victim].wait_started(started + 1).await;
    }
    for s in &serves {
        signal(s, libc::SIGTERM);
    }
    for s in &mut serves {
        let _ = s.wait().await;
    }
    assert!(kills >= 2, "{kills} kills");

    let store = backstop::open_store(&db_url).await.unwrap();
    let rows = store
        .list(ListParams {
            kind: Some(KIND.into()),
            limit: 100_000,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut instants: Vec<Timestamp> = rows
        .iter()
        .map(|t| instant_of(NAME, &t.key).unwrap_or_else(|| panic!("not a tick key: {}", t.key)))
        .collect();
    instants.sort();
    let distinct: HashSet<&Timestamp> = instants.iter().collect();
    assert_eq!(distinct.len(), instants.len(), "no instant twice");
    let (first, last) = (instants[0], *instants.last().unwrap());
    let span = last.duration_since(first).as_secs() as usize + 1;
    assert_eq!(
        instants.len(),
        span,
        "every second from {first} to {last} has its row ({} rows, {} kills)",
        instants.len(),
        kills
    );
    assert!(
        instants.len() as u64 + 5 >= run_for.as_secs(),
        "rows for the whole run: {}",
        instants.len()
    );
    let planned = store
        .schedules(SchedulesParams::default())
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.name == NAME)
        .and_then(|r| r.progress.planned_until)
        .unwrap();
    assert!(
        planned >= last,
        "planned_until {planned} covers the last row {last}"
    );
    assert_eq!(
        store.schedules(SchedulesParams::default()).await.unwrap()[0].missed,
        0,
        "another process planned while one was down"
    );
    println!(
        "{} instants, {kills} kills, {processes} process(es): one row each",
        instants.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_postgres_killed_in_turn_write_each_instant_once() {
    let Some(db) = TestDb::new(Server::Postgres) else {
        return;
    };
    run_and_kill(db.url(), 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_mysql_killed_in_turn_write_each_instant_once() {
    let Some(db) = TestDb::new(Server::Mysql) else {
        return;
    };
    run_and_kill(db.url(), 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_on_sqlite_killed_and_restarted_writes_each_instant_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    run_and_kill(url, 1).await;
}
