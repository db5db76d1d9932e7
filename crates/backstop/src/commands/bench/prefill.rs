//! The finished history a bench can start from: `n` succeeded tasks written through the
//! store's batch enqueue, claim and complete, as the engine writes them.

use anyhow::{Result, bail};
use backstop::{Status, Store, TaskId};
use backstop_core::AttemptOutcome;
use backstop_core::store::CountsParams;
use backstop_core::store::{
    ClaimParams, CompleteParams, Completion, EnqueueParams, EnqueueResult, LeaseRef,
};
use backstop_core::task::NewTask;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The kind of the prefilled finished tasks. The claim indexes of every store are partial or
/// status-led, so finished rows of any kind are outside them; a kind of their own keeps the
/// bench's progress check (counts of its kind) from counting them too.
pub(super) const FINISHED_KIND: &str = "bench.finished";
/// Tasks per prefill statement (enqueue, claim, complete).
const PREFILL_CHUNK: usize = 2000;
/// Prefill pipelines running at once.
const PREFILL_PIPELINES: usize = 4;

/// Fills the ledger with `n` succeeded tasks of [`FINISHED_KIND`], through the store's batch
/// enqueue, claim and complete, as the engine writes them (one attempt each).
pub(super) async fn prefill(store: &Arc<dyn Store>, n: usize) -> Result<Duration> {
    let t0 = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut pipelines = tokio::task::JoinSet::new();
    for p in 0..PREFILL_PIPELINES {
        let (store, next, done) = (store.clone(), next.clone(), done.clone());
        pipelines.spawn(async move {
            let owner = format!("bench-prefill-{p}");
            loop {
                let from = next.fetch_add(PREFILL_CHUNK, Ordering::Relaxed);
                if from >= n {
                    return Ok::<_, anyhow::Error>(());
                }
                let to = (from + PREFILL_CHUNK).min(n);
                let now = jiff::Timestamp::now();
                let tasks = (from..to)
                    .map(|i| NewTask {
                        id: TaskId::new(),
                        kind: FINISHED_KIND.into(),
                        key: format!("done-{i}"),
                        payload: format!(r#"{{"n":{i}}}"#).into_bytes(),
                        max_attempts: 8,
                        run_at: now,
                        expires_at: None,
                        traceparent: None,
                        intake: Default::default(),
                        origin: None,
                        group: None,
                    })
                    .collect();
                for r in store.enqueue(EnqueueParams { tasks, now }).await? {
                    if !matches!(r, EnqueueResult::Created(_)) {
                        bail!("prefill: unexpected enqueue result {r:?}");
                    }
                }
                // Claim until this chunk's worth is leased (other pipelines may take some of
                // these rows, and this one some of theirs: the count is what matters).
                let mut left = to - from;
                while left > 0 {
                    let now = jiff::Timestamp::now();
                    let claimed = store
                        .claim(ClaimParams {
                            kind: FINISHED_KIND.into(),
                            limit: left,
                            start: left,
                            owner: owner.clone(),
                            now,
                            lease_until: now + Duration::from_secs(600),
                            max_attempts: 8,
                            on_group_failure: Default::default(),
                            per_key: None,
                        })
                        .await?;
                    if claimed.is_empty() {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                    left -= claimed.len();
                    let ended = jiff::Timestamp::now();
                    let completions = claimed
                        .iter()
                        .map(|t| Completion {
                            lease: LeaseRef {
                                id: t.id,
                                epoch: t.epoch,
                            },
                            attempt: t.attempt,
                            status: Status::Succeeded,
                            run_at: None,
                            last_error: None,
                            reason: None,
                            outcome: AttemptOutcome::Succeeded,
                            http_status: None,
                            note: None,
                            started_at: now,
                            ended_at: ended,
                            worker: owner.clone(),
                        })
                        .collect();
                    let r = store
                        .complete(CompleteParams {
                            completions,
                            starts: None,
                            claims: Vec::new(),
                            now: ended,
                        })
                        .await?;
                    if !r.stale.is_empty() {
                        bail!("prefill: {} completions were stale", r.stale.len());
                    }
                    let total = done.fetch_add(claimed.len(), Ordering::Relaxed) + claimed.len();
                    if total / 100_000 != (total - claimed.len()) / 100_000 {
                        eprintln!(
                            "bench: prefilled {total} of {n} ({:.0} tasks/s)",
                            total as f64 / t0.elapsed().as_secs_f64()
                        );
                    }
                }
            }
        });
    }
    while let Some(r) = pipelines.join_next().await {
        r??;
    }
    let c = store
        .counts(CountsParams {
            kind: Some(FINISHED_KIND.to_string()),
        })
        .await?;
    if c.succeeded as usize != n || c.total() as usize != n {
        bail!("prefill: expected {n} succeeded tasks, found {c:?}");
    }
    Ok(t0.elapsed())
}
