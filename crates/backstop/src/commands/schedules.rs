//! `backstop schedules list|trigger|pause|resume|backfill`.

use super::{Ctx, print_json};
use crate::cli::SchedulesCommand;
use anyhow::{Result, bail};
use backstop_core::schedule::rfc3339_seconds;
use backstop_engine::schedules::{ScheduleActionError, ScheduleView};

pub async fn run(ctx: &Ctx, c: SchedulesCommand) -> Result<()> {
    let engine = ctx.engine(ctx.store().await?)?;
    let refused = |e: ScheduleActionError| -> anyhow::Error {
        match e {
            ScheduleActionError::Store(e) => e.into(),
            e => anyhow::anyhow!("{e}"),
        }
    };
    match c {
        SchedulesCommand::List { json } => {
            let views = engine.schedules().await?;
            if json {
                return print_json(&serde_json::json!({ "schedules": views }));
            }
            if views.is_empty() {
                println!("no schedules: none is configured ([schedules.NAME] in backstop.toml)");
            }
            for v in &views {
                print_view(v);
            }
        }
        SchedulesCommand::Trigger { name, json } => {
            let t = engine
                .trigger_schedule(&name, "cli")
                .await
                .map_err(refused)?;
            if json {
                return print_json(&t);
            }
            println!("{} {}", t.id, t.key);
        }
        SchedulesCommand::Pause { name, reason } => {
            let note = Some(match reason {
                Some(r) => format!("cli: {r}"),
                None => "cli".to_string(),
            });
            let v = engine
                .pause_schedule(&name, true, note)
                .await
                .map_err(refused)?;
            println!("{}: paused", v.name);
        }
        SchedulesCommand::Resume { name } => {
            let v = engine
                .pause_schedule(&name, false, None)
                .await
                .map_err(refused)?;
            if v.paused {
                bail!(
                    "{}: resumed by hand, but its configuration says paused = true",
                    v.name
                );
            }
            println!("{}: resumed", v.name);
        }
        SchedulesCommand::Backfill {
            name,
            from,
            to,
            dry_run,
            json,
        } => {
            let r = engine
                .backfill_schedule(&name, from, to, dry_run)
                .await
                .map_err(refused)?;
            if json {
                return print_json(&r);
            }
            let verb = if r.dry_run { "would create" } else { "created" };
            println!(
                "{}: {} instants in {}–{}: {verb} {}, {} had their row already",
                r.schedule,
                r.instants,
                rfc3339_seconds(r.from),
                rfc3339_seconds(r.to),
                r.created,
                r.existing
            );
        }
    }
    Ok(())
}

fn print_view(v: &ScheduleView) {
    let paused = if v.paused {
        match &v.paused_note {
            Some(n) => format!("  PAUSED ({n})"),
            None => "  PAUSED".to_string(),
        }
    } else {
        String::new()
    };
    // Late, overrun, rows missing and silent: as the reconciler's last pass found them.
    let mut found = String::new();
    if v.rows_missing > 0 {
        found.push_str(&format!("  ROWS MISSING {}", v.rows_missing));
    }
    if v.silent {
        found.push_str("  SILENT (no planner plans it)");
    }
    println!(
        "{}  {:?} {}  kind {}  missed {}  overlapped {}  late {}  overrun {}{found}{paused}",
        v.name, v.cron, v.timezone, v.kind, v.missed, v.overlapped, v.late, v.overrun
    );
    let next: Vec<String> = v.next.iter().take(3).map(|t| rfc3339_seconds(*t)).collect();
    println!("  next: {}", next.join(", "));
    if let Some(w) = v.waiting {
        println!("  waiting: {} (for the running tick)", rfc3339_seconds(w));
    }
    for t in &v.last_ticks {
        let state = match (&t.status, &t.reason) {
            (Some(s), Some(r)) => format!("{} ({r})", s.as_str()),
            (Some(s), None) => s.as_str().to_string(),
            (None, _) => "no row".to_string(),
        };
        println!("  {}  {state}", t.key);
    }
}
