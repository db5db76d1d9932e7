//! `backstop bench checkpoints`: how long one checkpoint takes, from the call to its durable
//! commit — what a handler's `TaskContext::checkpoint` waits for (the pull API adds one
//! loopback HTTP request). Sequential saves of a cursor by one running attempt.

use super::place::Place;
use crate::cli::CheckpointsBenchArgs;
use anyhow::{Result, bail};
use backstop::open_store;
use backstop_core::store::{CheckpointParams, Checkpointed, ClaimParams, LeaseRef};
use backstop_core::{KindConfig, Target};
use backstop_engine::{Engine, EnqueueRequest};
use serde::Serialize;
use std::time::{Duration, Instant};

const KIND: &str = "bench.checkpoint";

#[derive(Serialize)]
struct Report {
    store: &'static str,
    checkpoints: usize,
    ms_p50: f64,
    ms_p99: f64,
    ms_max: f64,
    per_second: f64,
}

pub async fn run(a: CheckpointsBenchArgs, database: Option<String>) -> Result<()> {
    if a.checkpoints == 0 {
        bail!("--checkpoints must be at least 1");
    }
    let r = Place::measure_in(database.as_deref(), async |place| measure(place, &a).await).await?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!(
        "store: {}  {} checkpoints, one after another: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms ({:.0}/s)",
        r.store, r.checkpoints, r.ms_p50, r.ms_p99, r.ms_max, r.per_second
    );
    Ok(())
}

async fn measure(place: &Place, a: &CheckpointsBenchArgs) -> Result<Report> {
    let store = open_store(&place.url()).await?;
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new(KIND, Target::Pull))
        .build()?;
    engine
        .enqueue(EnqueueRequest {
            kind: KIND.into(),
            key: "long-job".into(),
            payload: b"{}".to_vec(),
            ..Default::default()
        })
        .await?;
    let now = jiff::Timestamp::now();
    let task = store
        .claim(ClaimParams {
            kind: KIND.into(),
            limit: 1,
            start: 1,
            owner: "bench".into(),
            now,
            lease_until: now + Duration::from_secs(3600),
            max_attempts: 1,
            on_group_failure: Default::default(),
            per_key: None,
        })
        .await?
        .pop()
        .ok_or_else(|| anyhow::anyhow!("the bench's task was not claimed"))?;
    let lease = LeaseRef {
        id: task.id,
        epoch: task.epoch,
    };
    let mut took = Vec::with_capacity(a.checkpoints);
    let all = Instant::now();
    for i in 0..a.checkpoints {
        let t = Instant::now();
        let r = store
            .checkpoint(CheckpointParams {
                lease,
                attempt: task.attempt,
                worker: "bench".into(),
                cursor: format!(r#"{{"offset":{}}}"#, (i + 1) * 1000),
                now: jiff::Timestamp::now(),
            })
            .await?;
        took.push(t.elapsed());
        if r != Checkpointed::Saved {
            bail!("checkpoint {i} was rejected: the bench's lease was lost");
        }
    }
    let elapsed = all.elapsed();
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let at = |q: f64| ms(took[((took.len() - 1) as f64 * q).round() as usize]);
    Ok(Report {
        store: place.store(),
        checkpoints: a.checkpoints,
        ms_p50: at(0.5),
        ms_p99: at(0.99),
        ms_max: ms(*took.last().expect("at least one")),
        per_second: a.checkpoints as f64 / elapsed.as_secs_f64(),
    })
}
