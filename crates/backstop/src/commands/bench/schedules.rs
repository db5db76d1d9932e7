//! `backstop bench schedules`: many schedules firing every minute — how late their tick rows
//! are written and what the planning process costs — and one catch-up of many missed
//! instants.

use super::place::Place;
use super::run_engine;
use crate::cli::SchedulesBenchArgs;
use anyhow::{Result, bail};
use backstop::open_store;
use backstop_core::schedule::{Progress, ScheduleDef, instant_of};
use backstop_core::store::{AdvanceScheduleParams, ListParams};
use backstop_core::{KindConfig, Target};
use backstop_engine::Engine;
use serde::Serialize;
use std::time::{Duration, Instant};

const KIND: &str = "bench.tick";

#[derive(Serialize)]
struct Report {
    store: &'static str,
    schedules: usize,
    minutes: usize,
    rows: usize,
    /// Row written after its instant, by the rows' `created_at`.
    lag_ms_p50: f64,
    lag_ms_p99: f64,
    lag_ms_max: f64,
    /// The whole process's CPU (planner, store writer, runtime) over the minutes measured.
    process_cpu_percent_of_one_core: f64,
    missed_instants: usize,
    missed_pass_ms: f64,
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn def(cron: &str, seconds: bool) -> ScheduleDef {
    ScheduleDef {
        cron: cron.into(),
        seconds,
        kind: KIND.into(),
        overlap: backstop_core::schedule::Overlap::Allow,
        ..ScheduleDef::default()
    }
}

pub async fn run(a: SchedulesBenchArgs, database: Option<String>) -> Result<()> {
    if a.schedules == 0 || a.minutes == 0 {
        bail!("--schedules and --minutes must be at least 1");
    }
    let r = Place::measure_in(database.as_deref(), async |place| measure(place, &a).await).await?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!(
        "store: {}  {} schedules every minute, {} minutes: {} rows",
        r.store, r.schedules, r.minutes, r.rows
    );
    println!(
        "tick row written after its instant: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        r.lag_ms_p50, r.lag_ms_p99, r.lag_ms_max
    );
    println!(
        "process CPU: {:.1} % of one core (planner, reconciler, store writer and runtime together)",
        r.process_cpu_percent_of_one_core
    );
    println!(
        "catch-up: {} missed instants enumerated and written in {:.1} ms",
        r.missed_instants, r.missed_pass_ms
    );
    Ok(())
}

async fn measure(place: &Place, a: &SchedulesBenchArgs) -> Result<Report> {
    let store = open_store(&place.url()).await?;
    let mut b = Engine::builder(store.clone()).kind(KindConfig::new(KIND, Target::Pull));
    for i in 0..a.schedules {
        b = b.schedule(
            def("* * * * *", false)
                .build(&format!("s{i}"), |k| k == KIND)
                .map_err(|e| anyhow::anyhow!("{e}"))?,
        );
    }
    // One every-second schedule for the catch-up, planned by hand below (it is not in the
    // running engine).
    let catch = def("* * * * * *", true)
        .build("catch-up", |k| k == KIND)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let engine = b.build()?;
    let (stop, runner) = run_engine(&engine);
    // The first pass only notes where planning starts; wait for the next minute.
    let now = jiff::Timestamp::now();
    let next_minute = now.as_second() / 60 * 60 + 60;
    let start_wait = Duration::from_secs((next_minute - now.as_second()) as u64);
    eprintln!(
        "bench: {} schedules planned; measuring from the next minute ({} s away)",
        a.schedules,
        start_wait.as_secs()
    );
    tokio::time::sleep(start_wait - Duration::from_millis(500).min(start_wait)).await;
    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    tokio::time::sleep(Duration::from_millis(500) + Duration::from_secs(60 * a.minutes as u64))
        .await;
    let (cpu, wall) = (cpu_seconds() - cpu0, wall0.elapsed().as_secs_f64());
    let _ = stop.send(());
    runner.await?;

    let rows = store
        .list(ListParams {
            kind: Some(KIND.into()),
            limit: a.schedules * (a.minutes + 2),
            ..Default::default()
        })
        .await?;
    let mut lags: Vec<f64> = rows
        .iter()
        .filter_map(|t| {
            let name = t.key.split('@').next()?;
            let at = instant_of(name, &t.key)?;
            (at.as_second() >= next_minute)
                .then(|| t.created_at.duration_since(at).as_secs_f64() * 1000.0)
        })
        .collect();
    lags.sort_by(|x, y| x.total_cmp(y));
    if lags.is_empty() {
        bail!("no tick rows were written");
    }
    let pct = |p: f64| lags[((lags.len() - 1) as f64 * p).round() as usize];

    // Catch-up: planned up to 1,000 s + a minute ago, then one pass.
    let missed_engine = Engine::builder(store.clone())
        .kind(KindConfig::new(KIND, Target::Pull))
        .schedule(catch)
        .build()?;
    let since = jiff::Timestamp::now() - Duration::from_secs(1000 + 60);
    store
        .advance_schedule(AdvanceScheduleParams {
            name: "catch-up".into(),
            expected: None,
            progress: Progress {
                planned_until: Some(since),
                ..Progress::default()
            },
            add_missed: 0,
            add_overlapped: 0,
            now: since,
        })
        .await?;
    let t = Instant::now();
    let pass = missed_engine.plan_schedule("catch-up").await?;
    let missed_pass_ms = t.elapsed().as_secs_f64() * 1000.0;

    Ok(Report {
        store: place.store(),
        schedules: a.schedules,
        minutes: a.minutes,
        rows: lags.len(),
        lag_ms_p50: pct(0.5),
        lag_ms_p99: pct(0.99),
        lag_ms_max: *lags.last().expect("not empty"),
        process_cpu_percent_of_one_core: cpu / wall * 100.0,
        missed_instants: pass.created,
        missed_pass_ms,
    })
}
