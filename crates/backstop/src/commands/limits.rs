//! `backstop limits show|set|clear KIND [KEY]`.

use super::{Ctx, print_json};
use crate::cli::LimitsCommand;
use anyhow::Result;
use backstop_core::limit::RateSpec;
use backstop_engine::{KeyLimits, KeyLimitsView, KindLimitsView, LimitOverrideError};

pub async fn run(ctx: &Ctx, c: LimitsCommand) -> Result<()> {
    let engine = ctx.engine(ctx.store().await?)?;
    let refused = |e: LimitOverrideError| -> anyhow::Error {
        match e {
            LimitOverrideError::Store(e) => e.into(),
            e => anyhow::anyhow!("{e}"),
        }
    };
    match c {
        LimitsCommand::Show { kind, key, json } => match key {
            Some(key) => {
                let v = engine.key_limits(&kind, &key).await.map_err(refused)?;
                if json {
                    return print_json(&v);
                }
                print_key(&v);
            }
            None => {
                let v = engine.kind_limits(&kind).await.map_err(refused)?;
                if json {
                    return print_json(&v);
                }
                print_kind(&v);
            }
        },
        LimitsCommand::Set {
            kind,
            key,
            max,
            rate,
            period,
            burst,
            reason,
        } => {
            let rate = match rate {
                Some(0) => anyhow::bail!("--rate 0 would never let a task start: give at least 1"),
                Some(limit) => Some(RateSpec {
                    limit,
                    period: period.unwrap_or(std::time::Duration::from_secs(1)),
                    burst: match burst {
                        Some(0) => {
                            anyhow::bail!("--burst 0 would never let a task start: give at least 1")
                        }
                        b => b.unwrap_or(1),
                    },
                }),
                None => None,
            };
            if rate.is_some_and(|r| r.period.as_millis() == 0) {
                anyhow::bail!("--period: give at least 1ms, e.g. 1s");
            }
            let v = engine
                .set_key_limits(&kind, &key, KeyLimits { max, rate }, &reason, "cli")
                .await
                .map_err(refused)?;
            print_key(&v);
        }
        LimitsCommand::Clear { kind, key, reason } => {
            let v = engine
                .clear_key_limits(&kind, &key, &reason, "cli")
                .await
                .map_err(refused)?;
            print_key(&v);
        }
    }
    Ok(())
}

fn limits_line(
    c: Option<&backstop_engine::limit_overrides::ConcurrencyView>,
    r: Option<&backstop_engine::limit_overrides::RateView>,
) -> String {
    let mut parts = Vec::new();
    if let Some(c) = c {
        parts.push(format!("at most {} at once per {}", c.max, c.key));
    }
    if let Some(r) = r {
        parts.push(format!(
            "{} per {} per {}, burst {}",
            r.limit, r.period, r.key, r.burst
        ));
    }
    parts.join("; ")
}

fn print_kind(v: &KindLimitsView) {
    println!(
        "{}: {}",
        v.kind,
        limits_line(v.concurrency.as_ref(), v.rate.as_ref())
    );
    for o in &v.overrides {
        let mut what = Vec::new();
        if let Some(m) = o.max {
            what.push(format!("max {m}"));
        }
        if let Some(r) = &o.rate {
            what.push(format!("{} per {}, burst {}", r.limit, r.period, r.burst));
        }
        println!(
            "  {:?}: {}  (by {} at {}: {})",
            o.key,
            what.join(", "),
            o.by,
            backstop_core::wire_time::format(o.since),
            o.reason
        );
    }
}

fn print_key(v: &KeyLimitsView) {
    let from = if v.overridden.is_some() {
        "overridden"
    } else {
        "the kind's"
    };
    println!(
        "{} {:?}: {} ({from})",
        v.kind,
        v.key,
        limits_line(v.concurrency.as_ref(), v.rate.as_ref())
    );
    for h in &v.history {
        println!(
            "  {}  {}  by {}: {}",
            backstop_core::wire_time::format(h.at),
            h.action,
            h.by,
            h.reason
        );
    }
}
