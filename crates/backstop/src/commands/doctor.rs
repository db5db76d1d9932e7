//! `backstop doctor`: the health of the ledger and of the processes that share it.

use super::{Ctx, print_json};
use anyhow::Result;
use backstop_core::store::{BacklogParams, ListParams};
use backstop_core::store::{BeatsParams, CountsParams};
use backstop_core::{Clock, Status, Store, SystemClock};
use backstop_engine::reconciler::nodes::{NODE_PREFIX, NodeBeat};
use backstop_engine::reconciler::overdue::{Overdue, judge};
use backstop_engine::reconciler::{PassReport, RECONCILER_BEAT};
use jiff::{SignedDuration, Timestamp, Unit};
use serde::Serialize;
use std::collections::HashMap;

#[derive(Serialize)]
struct Report {
    healthy: bool,
    problems: Vec<String>,
    /// Who ran the last reconciler pass: the leader then.
    leader: Option<String>,
    #[serde(with = "backstop_core::wire_time::option")]
    last_pass_at: Option<Timestamp>,
    last_pass_age_s: Option<f64>,
    processes: Vec<Process>,
    kinds: Vec<KindHealth>,
    overdue: Vec<Overdue>,
    bridges: Vec<backstop_engine::BridgeView>,
}

#[derive(Serialize)]
struct Process {
    owner: String,
    beat_age_s: f64,
    kinds: Vec<String>,
}

#[derive(Serialize)]
struct KindHealth {
    kind: String,
    pending: u64,
    due: u64,
    overdue: u64,
    running: u64,
    oldest_pending_age_s: Option<f64>,
    dead_letters: u64,
}

/// How many of a kind's newest tasks are looked at to tell whether its attempts all fail.
const RECENT: usize = 20;
/// The fewest tried tasks that make "every one failed" a finding rather than chance.
const FAILING_AFTER: usize = 3;

/// Whether every recently tried task of `kind` ended its last attempt in failure (a dead
/// letter, or a retry waiting after an error): the downstream is likely broken. `None` when
/// some succeeded or too few were tried to say.
async fn failing(store: &dyn Store, kind: &str) -> Result<Option<String>> {
    let recent = store
        .list(ListParams {
            kind: Some(kind.into()),
            limit: RECENT,
            ..Default::default()
        })
        .await?;
    // Running or held tasks have no finished last attempt to judge.
    let tried: Vec<_> = recent
        .iter()
        .filter(|t| t.attempts > 0 && t.status != Status::Running && !t.is_held())
        .collect();
    let failed = |t: &&backstop_core::Task| {
        t.status == Status::Failed || (t.status == Status::Pending && t.last_error.is_some())
    };
    if tried.len() < FAILING_AFTER || !tried.iter().all(failed) {
        return Ok(None);
    }
    let last = tried[0]
        .last_error
        .as_deref()
        .unwrap_or("no error recorded");
    Ok(Some(format!(
        "the last attempt of each of its {} most recent tried tasks failed (latest error: {last})",
        tried.len()
    )))
}

fn age(from: Timestamp, now: Timestamp) -> f64 {
    now.duration_since(from).as_secs_f64().max(0.0)
}

pub async fn run(ctx: &Ctx, json: bool) -> Result<()> {
    let store = ctx.store().await?;
    let opts = &ctx.config.engine;
    let now = SystemClock.now();
    let mut problems = Vec::new();
    let pass = store
        .beats(BeatsParams {
            prefix: RECONCILER_BEAT.to_string(),
        })
        .await?
        .into_iter()
        .find(|b| b.name == RECONCILER_BEAT);
    let stalled_after = SignedDuration::try_from(opts.stalled_after)?;
    match &pass {
        Some(b) if now.duration_since(b.at) > stalled_after => problems.push(format!(
            "the reconciler is stalled: its last pass was {:.0} s ago (threshold {:?})",
            age(b.at, now),
            opts.stalled_after
        )),
        Some(_) => {}
        None => problems.push("no reconciler pass has ever been recorded: is a backstop process serving this database?".into()),
    }
    let report = pass
        .as_ref()
        .and_then(|b| PassReport::from_detail(&b.detail));
    if let Some(r) = &report
        && !r.drift.is_empty()
    {
        problems.push(format!(
            "the last audit found {} task(s) whose timeline disagrees with their status",
            r.drift.len()
        ));
    }
    let fresh = now - SignedDuration::try_from(opts.node_beat)? * 3;
    let nodes: Vec<NodeBeat> = store
        .beats(BeatsParams {
            prefix: NODE_PREFIX.to_string(),
        })
        .await?
        .iter()
        .filter(|b| b.at >= fresh)
        .filter_map(NodeBeat::from_beat)
        .collect();
    if nodes.is_empty() {
        problems.push("no live backstop process".into());
    }
    let overdue_after = SignedDuration::try_from(opts.overdue_after)?;
    let backlog = store
        .backlog(BacklogParams {
            now,
            overdue_before: now - overdue_after,
            sample: 3,
        })
        .await?;
    let configs: HashMap<_, _> = ctx
        .config
        .kinds
        .iter()
        .map(|k| (k.name.clone(), k.clone()))
        .collect();
    let overdue = judge(&backlog, &nodes, &configs, now - overdue_after);
    for o in &overdue {
        problems.push(format!(
            "{}: {} overdue, {}",
            o.kind,
            o.count,
            o.why.explain()
        ));
    }
    let bridges = bridge_problems(ctx, &*store, now, &mut problems).await?;
    let mut names: Vec<String> = configs.keys().cloned().collect();
    names.extend(backlog.iter().map(|b| b.kind.clone()));
    names.sort();
    names.dedup();
    let mut kinds = Vec::new();
    for k in names {
        let b = backlog.iter().find(|b| b.kind == k);
        let dead = store
            .counts(CountsParams {
                kind: Some(k.clone()),
            })
            .await?
            .get(Status::Failed);
        // Dead letters wait for a person: that is what doctor is for.
        if dead > 0 {
            problems.push(format!(
                "{k}: {dead} dead letter(s) waiting for a person (backstop dead list --kind {k}; retry or resolve them)"
            ));
        }
        if let Some(why) = failing(&*store, &k).await? {
            problems.push(format!("{k}: {why}"));
        }
        kinds.push(KindHealth {
            pending: b.map_or(0, |b| b.pending),
            due: b.map_or(0, |b| b.due),
            overdue: b.map_or(0, |b| b.overdue),
            running: b.map_or(0, |b| b.running),
            oldest_pending_age_s: b.and_then(|b| b.oldest_run_at).map(|t| age(t, now)),
            dead_letters: dead,
            kind: k,
        });
    }
    let out = Report {
        healthy: problems.is_empty(),
        leader: pass.as_ref().map(|b| b.owner.clone()),
        last_pass_at: pass.as_ref().map(|b| b.at),
        last_pass_age_s: pass.as_ref().map(|b| age(b.at, now)),
        processes: nodes
            .iter()
            .map(|n| {
                let mut kinds: Vec<String> = n.kinds.keys().cloned().collect();
                kinds.sort();
                Process {
                    owner: n.owner.clone(),
                    beat_age_s: age(n.at, now),
                    kinds,
                }
            })
            .collect(),
        kinds,
        overdue,
        bridges,
        problems,
    };
    if json {
        print_json(&out)?;
    } else {
        print(&out);
    }
    if !out.healthy {
        std::process::exit(1);
    }
    Ok(())
}

fn print(r: &Report) {
    let secs = |s: f64| {
        SignedDuration::from_secs(s as i64)
            .round(Unit::Second)
            .map(|d| format!("{d:#}"))
            .unwrap_or_default()
    };
    match (&r.leader, r.last_pass_age_s) {
        (Some(l), Some(a)) => println!("reconciler  last pass {} ago by {l}", secs(a)),
        _ => println!("reconciler  no pass recorded"),
    }
    println!("processes   {}", r.processes.len());
    for p in &r.processes {
        println!(
            "  {}  beat {} ago  kinds: {}",
            p.owner,
            secs(p.beat_age_s),
            p.kinds.join(", ")
        );
    }
    if !r.bridges.is_empty() {
        println!("bridges");
    }
    for b in &r.bridges {
        println!(
            "  {:<16} {}  connected={}  received {} = inserted {} + deduplicated {} + rejected {} + in flight {}{}",
            b.name,
            b.worker,
            b.connected,
            b.received,
            b.inserted,
            b.deduplicated,
            b.rejected,
            b.in_flight,
            if b.stale { "  (stale)" } else { "" }
        );
    }
    println!("kinds");
    for k in &r.kinds {
        println!(
            "  {:<24} pending {:>7}  due {:>7}  overdue {:>6}  running {:>5}  dead {:>5}  oldest pending {}",
            k.kind,
            k.pending,
            k.due,
            k.overdue,
            k.running,
            k.dead_letters,
            k.oldest_pending_age_s
                .map(secs)
                .unwrap_or_else(|| "-".into())
        );
    }
    if r.problems.is_empty() {
        println!("health      OK");
    } else {
        println!("health      {} problem(s)", r.problems.len());
        for p in &r.problems {
            println!("  - {p}");
        }
    }
}

/// The bridges' last beats: one whose counts do not balance, or that is live and down, needs
/// a person; a configured bridge that no live process runs is named too.
async fn bridge_problems(
    ctx: &Ctx,
    store: &dyn Store,
    now: Timestamp,
    problems: &mut Vec<String>,
) -> Result<Vec<backstop_engine::BridgeView>> {
    let views =
        backstop_engine::bridges::from_beats(store, now, ctx.config.engine.bridge_beat).await?;
    for v in &views {
        if !v.balanced {
            problems.push(format!(
                "bridge {} on {}: its counts do not balance: received {} but inserted {} + deduplicated {} + rejected {} + in flight {}",
                v.name, v.worker, v.received, v.inserted, v.deduplicated, v.rejected, v.in_flight
            ));
        }
        if let Some(a) = v.ack_pending
            && !v.stale
            && a.near_limit()
        {
            problems.push(format!(
                "bridge {} on {}: {} deliveries unacknowledged of the {} its broker allows (MaxAckPending); at the limit it delivers nothing more",
                v.name, v.worker, a.pending, a.max
            ));
        }
        if !v.stale && !v.connected {
            problems.push(format!(
                "bridge {} on {} is not connected to {}: {}",
                v.name,
                v.worker,
                v.broker,
                v.last_error.as_deref().unwrap_or("no error recorded yet")
            ));
        }
    }
    for b in &ctx.config.bridges {
        if !views.iter().any(|v| v.name == b.name && !v.stale) {
            problems.push(format!(
                "bridge {}: no live process runs it (is backstop serve running with this configuration?)",
                b.name
            ));
        }
    }
    Ok(views)
}
