//! `backstop bench groups`: no head-of-line blocking across ordering groups. A backlog of
//! `--backlog` tasks is queued in one group (A), draining one at a time as its order demands;
//! meanwhile a task is enqueued in another group (B) every `--every`, each after the one before
//! it ran, and the time from its enqueue's commit to its handler's start is measured. The
//! promise (issue 18 §1, §7): B's start stays under a second at p99 whatever A holds.

use super::place::Place;
use crate::cli::GroupsBenchArgs;
use anyhow::{Result, bail};
use backstop::{Engine, EngineOptions, EnqueueRequest, KindConfig, Outcome, Target, handler};
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const KIND: &str = "bench.groups";

#[derive(Serialize)]
struct Report {
    store: &'static str,
    backlog: usize,
    backlog_enqueue_s: f64,
    probes: usize,
    start_ms_p50: f64,
    start_ms_p99: f64,
    start_ms_max: f64,
    /// Group A's tasks run while the probes were measured.
    backlog_ran: usize,
}

pub async fn run(a: GroupsBenchArgs, database: Option<String>) -> Result<()> {
    if a.backlog == 0 || a.probes == 0 {
        bail!("--backlog and --probes must be at least 1");
    }
    let r = Place::measure_in(database.as_deref(), async |place| measure(place, &a).await).await?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!(
        "store: {}  {} tasks queued in group A (enqueued in {:.1} s); {} tasks of group B, one at a time: start p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; A ran {} meanwhile",
        r.store,
        r.backlog,
        r.backlog_enqueue_s,
        r.probes,
        r.start_ms_p50,
        r.start_ms_p99,
        r.start_ms_max,
        r.backlog_ran
    );
    Ok(())
}

async fn measure(place: &Place, a: &GroupsBenchArgs) -> Result<Report> {
    let store = backstop::open_store(&place.url()).await?;
    let mut kind = KindConfig::new(KIND, Target::InProcess);
    kind.ordering = Some(backstop_core::group::Ordering::default());
    let (started_tx, mut started) = mpsc::unbounded_channel::<(String, Instant)>();
    let ran = Arc::new(AtomicUsize::new(0));
    let ran_in = ran.clone();
    let engine = Engine::builder(store.clone())
        .kind(kind)
        .handler(
            KIND,
            handler(move |task| {
                let now = Instant::now();
                if task.key.starts_with("b-") {
                    let _ = started_tx.send((task.key.clone(), now));
                } else {
                    ran_in.fetch_add(1, Ordering::Relaxed);
                }
                async { Outcome::Success }
            }),
        )
        .options(EngineOptions::default())
        .build()?;

    let t0 = Instant::now();
    let mut next = 0;
    while next < a.backlog {
        let end = (next + 1_000).min(a.backlog);
        let reqs = (next..end)
            .map(|i| EnqueueRequest {
                kind: KIND.into(),
                key: format!("a-{i}"),
                payload: b"{}".to_vec(),
                group: Some("A".into()),
                ..Default::default()
            })
            .collect();
        for r in engine.enqueue_many(reqs).await? {
            r?;
        }
        next = end;
    }
    let backlog_enqueue_s = t0.elapsed().as_secs_f64();

    let (stop, runner) = super::run_engine(&engine);
    // Let the dispatcher settle into draining A before measuring B.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ran_before = ran.load(Ordering::Relaxed);
    let mut took = Vec::with_capacity(a.probes);
    for i in 0..a.probes {
        let key = format!("b-{i}");
        engine
            .enqueue(EnqueueRequest {
                kind: KIND.into(),
                key: key.clone(),
                payload: b"{}".to_vec(),
                group: Some("B".into()),
                ..Default::default()
            })
            .await?;
        let committed = Instant::now();
        let (got, at) = tokio::time::timeout(Duration::from_secs(60), started.recv())
            .await
            .map_err(|_| anyhow::anyhow!("{key} did not start within 60 s"))?
            .ok_or_else(|| anyhow::anyhow!("the engine stopped"))?;
        if got != key {
            bail!("group B ran {got} while {key} was expected: out of order");
        }
        took.push(at.saturating_duration_since(committed));
        tokio::time::sleep(a.every).await;
    }
    let backlog_ran = ran.load(Ordering::Relaxed) - ran_before;
    let _ = stop.send(());
    let _ = runner.await;
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let at = |q: f64| ms(took[((took.len() - 1) as f64 * q).round() as usize]);
    Ok(Report {
        store: place.store(),
        backlog: a.backlog,
        backlog_enqueue_s,
        probes: a.probes,
        start_ms_p50: at(0.5),
        start_ms_p99: at(0.99),
        start_ms_max: ms(*took.last().expect("at least one")),
        backlog_ran,
    })
}
