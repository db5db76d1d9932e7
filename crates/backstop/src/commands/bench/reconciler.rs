//! `backstop bench reconciler`: how long one reconciler pass takes over a ledger of many
//! finished tasks and some due ones. A pass reads only unfinished rows (rescue, expiry,
//! backlog through partial indexes) plus one audit page, so the finished history should not
//! show in its cost.

use super::place::Place;
use super::prefill::prefill;
use crate::cli::ReconcilerBenchArgs;
use anyhow::{Result, bail};
use backstop::open_store;
use backstop_core::store::{EnqueueParams, EnqueueResult};
use backstop_core::task::NewTask;
use backstop_core::{KindConfig, Target, TaskId};
use backstop_engine::Engine;
use serde::Serialize;
use std::time::{Duration, Instant};

const DUE_KIND: &str = "bench.due";

#[derive(Serialize)]
struct Report {
    store: &'static str,
    finished: usize,
    due: usize,
    passes: usize,
    pass_ms_median: f64,
    pass_ms_p90: f64,
    pass_ms_max: f64,
    audited_per_pass: u64,
    overdue_found: u64,
}

pub async fn run(a: ReconcilerBenchArgs, database: Option<String>) -> Result<()> {
    if a.passes == 0 {
        bail!("--passes must be at least 1");
    }
    let r = Place::measure_in(database.as_deref(), async |place| measure(place, &a).await).await?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!(
        "store: {}  finished tasks: {}  due tasks: {}",
        r.store, r.finished, r.due
    );
    println!(
        "reconciler pass: median {:.1} ms, p90 {:.1} ms, max {:.1} ms over {} passes (audit {} tasks per pass; overdue found {})",
        r.pass_ms_median,
        r.pass_ms_p90,
        r.pass_ms_max,
        r.passes,
        r.audited_per_pass,
        r.overdue_found
    );
    Ok(())
}

async fn measure(place: &Place, a: &ReconcilerBenchArgs) -> Result<Report> {
    let store = open_store(&place.url()).await?;
    if a.finished > 0 {
        let took = prefill(&store, a.finished).await?;
        eprintln!(
            "bench: {} finished tasks in {:.1} s",
            a.finished,
            took.as_secs_f64()
        );
    }
    // Due two minutes ago: past the default one-minute overdue threshold.
    let past = jiff::Timestamp::now() - Duration::from_secs(120);
    for from in (0..a.due).step_by(1000) {
        let tasks = (from..(from + 1000).min(a.due))
            .map(|i| NewTask {
                id: TaskId::new(),
                kind: DUE_KIND.into(),
                key: format!("due-{i}"),
                payload: b"{}".to_vec(),
                max_attempts: 8,
                run_at: past,
                expires_at: None,
                traceparent: None,
                intake: Default::default(),
                origin: None,
                group: None,
            })
            .collect();
        for r in store.enqueue(EnqueueParams { tasks, now: past }).await? {
            if !matches!(r, EnqueueResult::Created(_)) {
                bail!("unexpected enqueue result {r:?}");
            }
        }
    }
    place.settle().await?;
    // A pull kind: configured, never dispatched, so the due tasks stay due.
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new(DUE_KIND, Target::Pull))
        .build()?;
    let mut took = Vec::with_capacity(a.passes);
    let (mut audited, mut overdue) = (0, 0);
    for _ in 0..a.passes {
        let t = Instant::now();
        let r = engine.reconcile_once().await;
        took.push(t.elapsed().as_secs_f64() * 1000.0);
        if !r.errors.is_empty() {
            bail!("reconciler pass failed: {:?}", r.errors);
        }
        audited = r.audited;
        overdue = r.overdue.iter().map(|o| o.count).sum();
    }
    took.sort_by(f64::total_cmp);
    let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
    Ok(Report {
        store: place.store(),
        finished: a.finished,
        due: a.due,
        passes: a.passes,
        pass_ms_median: at(0.5),
        pass_ms_p90: at(0.9),
        pass_ms_max: at(1.0),
        audited_per_pass: audited,
        overdue_found: overdue,
    })
}
