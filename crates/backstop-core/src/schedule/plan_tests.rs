use super::*;
use crate::schedule::spec::ScheduleDef;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn schedule(extra: serde_json::Value) -> Schedule {
    let mut d = serde_json::json!({"cron": "* * * * *", "kind": "k"});
    d.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    serde_json::from_value::<ScheduleDef>(d)
        .unwrap()
        .build("s", |_| true)
        .unwrap()
}

fn since(at: &str) -> Progress {
    Progress {
        planned_until: Some(ts(at)),
        ..Progress::default()
    }
}

fn runs(p: &Plan) -> Vec<String> {
    p.ticks
        .iter()
        .filter(|t| t.compensated.is_none())
        .map(|t| t.key.clone())
        .collect()
}

fn reasons(p: &Plan) -> Vec<String> {
    p.ticks
        .iter()
        .filter_map(|t| t.compensated.clone())
        .collect()
}

#[test]
fn a_first_pass_only_remembers_now() {
    let p = plan(
        &schedule(serde_json::json!({})),
        &Progress::default(),
        None,
        ts("2026-01-01T12:00:30Z"),
    );
    assert!(p.ticks.is_empty());
    assert_eq!(p.progress.planned_until, Some(ts("2026-01-01T12:00:30Z")));
}

#[test]
fn an_instant_on_time_runs() {
    let s = schedule(serde_json::json!({}));
    let p = plan(
        &s,
        &since("2026-01-01T12:00:30Z"),
        None,
        ts("2026-01-01T12:01:00.2Z"),
    );
    assert_eq!(runs(&p), ["s@2026-01-01T12:01:00Z"]);
    assert_eq!(p.ticks[0].run_at, ts("2026-01-01T12:01:00Z"));
    assert!(p.new_outage.is_none());
    assert_eq!(p.progress.planned_until, Some(ts("2026-01-01T12:01:00.2Z")));
}

#[test]
fn overlap_skip_compensates_while_the_last_tick_runs() {
    let s = schedule(serde_json::json!({}));
    let id = TaskId::new();
    let last = Some(LastTick {
        id,
        status: Status::Running,
    });
    let p = plan(
        &s,
        &since("2026-01-01T12:00:30Z"),
        last,
        ts("2026-01-01T12:01:00Z"),
    );
    assert!(runs(&p).is_empty());
    assert_eq!(reasons(&p), [format!("overlap: {id} still running")]);
    let done = Some(LastTick {
        id,
        status: Status::Succeeded,
    });
    let p = plan(
        &s,
        &since("2026-01-01T12:00:30Z"),
        done,
        ts("2026-01-01T12:01:00Z"),
    );
    assert_eq!(runs(&p).len(), 1);
    let allow = schedule(serde_json::json!({"overlap": "allow"}));
    let p = plan(
        &allow,
        &since("2026-01-01T12:00:30Z"),
        last,
        ts("2026-01-01T12:01:00Z"),
    );
    assert_eq!(runs(&p).len(), 1);
}

#[test]
fn queue_one_holds_one_instant_and_skips_the_next() {
    let s = schedule(serde_json::json!({"overlap": "queue_one"}));
    let running = Some(LastTick {
        id: TaskId::new(),
        status: Status::Running,
    });
    let p1 = plan(
        &s,
        &since("2026-01-01T12:00:30Z"),
        running,
        ts("2026-01-01T12:01:00Z"),
    );
    assert!(p1.ticks.is_empty(), "the waiting instant has no row yet");
    assert_eq!(p1.progress.waiting, Some(ts("2026-01-01T12:01:00Z")));
    let p2 = plan(&s, &p1.progress, running, ts("2026-01-01T12:02:00Z"));
    assert!(runs(&p2).is_empty());
    assert!(
        reasons(&p2)[0].starts_with("overlap: "),
        "{:?}",
        reasons(&p2)
    );
    assert!(reasons(&p2)[0].contains("12:01:00Z already waits"));
    let done = Some(LastTick {
        id: TaskId::new(),
        status: Status::Failed,
    });
    let p3 = plan(&s, &p2.progress, done, ts("2026-01-01T12:02:30Z"));
    assert_eq!(runs(&p3), ["s@2026-01-01T12:01:00Z"]);
    assert_eq!(p3.ticks[0].run_at, ts("2026-01-01T12:02:30Z"));
    assert_eq!(p3.progress.waiting, None);
}

fn outage(extra: serde_json::Value) -> Plan {
    // Down from 10:00 to 10:15:30: 10:01 … 10:14 missed, 10:15 on time.
    plan(
        &schedule(extra),
        &since("2026-01-01T10:00:00Z"),
        None,
        ts("2026-01-01T10:15:30Z"),
    )
}

#[test]
fn catch_up_skip_compensates_every_missed_instant() {
    let p = outage(serde_json::json!({}));
    assert_eq!(p.ticks.len(), 15);
    assert_eq!(runs(&p), ["s@2026-01-01T10:15:00Z"]);
    let r = reasons(&p);
    assert_eq!(r.len(), 14);
    assert!(
        r.iter()
            .all(|r| r == "missed: no scheduler ran 2026-01-01T10:00:00Z–2026-01-01T10:15:30Z"),
        "{r:?}"
    );
    assert_eq!(
        p.new_outage,
        Some((ts("2026-01-01T10:00:00Z"), ts("2026-01-01T10:15:30Z")))
    );
}

#[test]
fn catch_up_latest_runs_the_last_missed_instant() {
    // An on-time instant is the most recent: every missed one is compensated.
    let p = outage(serde_json::json!({"catch_up": "latest"}));
    assert_eq!(runs(&p), ["s@2026-01-01T10:15:00Z"]);
    assert_eq!(reasons(&p).len(), 14);
    assert!(reasons(&p)[0].starts_with("missed: "));
    // Hourly, down 09:30 to 12:20: 10:00, 11:00 and 12:00 missed; 12:00 runs.
    let s = schedule(serde_json::json!({"catch_up": "latest", "cron": "@hourly"}));
    let p = plan(
        &s,
        &since("2026-01-01T09:30:00Z"),
        None,
        ts("2026-01-01T12:20:00Z"),
    );
    assert_eq!(runs(&p), ["s@2026-01-01T12:00:00Z"]);
    assert_eq!(
        p.ticks[2].run_at,
        ts("2026-01-01T12:20:00Z"),
        "it starts now"
    );
    assert!(reasons(&p)[1].ends_with("(catch_up = latest runs only the last)"));
}

#[test]
fn catch_up_all_runs_up_to_the_cap() {
    let p = outage(serde_json::json!({"catch_up": "all", "catchup_max": 5}));
    assert_eq!(
        runs(&p)[..5],
        [
            "s@2026-01-01T10:01:00Z",
            "s@2026-01-01T10:02:00Z",
            "s@2026-01-01T10:03:00Z",
            "s@2026-01-01T10:04:00Z",
            "s@2026-01-01T10:05:00Z"
        ]
    );
    assert_eq!(
        runs(&p).len(),
        5,
        "the on-time instant overlaps the catch-up: skipped"
    );
    assert_eq!(reasons(&p).len(), 10);
    assert!(reasons(&p)[0].contains("beyond catchup_max = 5"));
    assert!(reasons(&p)[9].starts_with("overlap: "));
    // Missed runs start now, not at their past instants.
    assert_eq!(p.ticks[0].run_at, ts("2026-01-01T10:15:30Z"));
}

#[test]
fn catchup_window_compensates_older_instants() {
    let p = outage(serde_json::json!({"catch_up": "all", "catchup_window": "5m"}));
    // 10:10:30 is the window's edge: 10:11 … 10:14 run, 10:01 … 10:10 do not.
    assert_eq!(runs(&p)[0], "s@2026-01-01T10:11:00Z");
    assert_eq!(runs(&p).len(), 4);
    assert!(reasons(&p)[0].ends_with("(older than catchup_window)"));
}

#[test]
fn a_long_outage_is_planned_over_passes_with_one_alert() {
    // 2,500 minutes down.
    let s = schedule(serde_json::json!({"catch_up": "latest"}));
    let now = ts("2026-01-03T05:40:30Z");
    let mut progress = since("2026-01-01T12:00:00Z");
    let (mut rows, mut alerts, mut ran) = (0, 0, Vec::new());
    for pass in 0.. {
        assert!(pass < 10);
        let p = plan(&s, &progress, None, now);
        rows += p.ticks.len();
        alerts += usize::from(p.new_outage.is_some());
        ran.extend(runs(&p));
        progress = p.progress;
        if !p.more {
            break;
        }
    }
    assert_eq!(rows, 2_500);
    assert_eq!(alerts, 1);
    assert_eq!(
        ran,
        ["s@2026-01-03T05:40:00Z"],
        "the on-time instant is the latest"
    );
    assert_eq!(progress.outage, None);
    assert_eq!(progress.planned_until, Some(now));
}

#[test]
fn paused_instants_are_rows_too() {
    let s = schedule(serde_json::json!({}));
    let mut progress = since("2026-01-01T12:00:30Z");
    progress.paused = true;
    let p = plan(&s, &progress, None, ts("2026-01-01T12:01:00Z"));
    assert!(runs(&p).is_empty());
    assert!(reasons(&p)[0].starts_with("paused"));
}

#[test]
fn jitter_is_the_same_for_an_instant_and_within_bounds() {
    let s = schedule(serde_json::json!({"jitter": "30s"}));
    let a = plan(
        &s,
        &since("2026-01-01T12:00:30Z"),
        None,
        ts("2026-01-01T12:01:00Z"),
    );
    let b = plan(
        &s,
        &since("2026-01-01T12:00:40Z"),
        None,
        ts("2026-01-01T12:01:05Z"),
    );
    assert_eq!(a.ticks[0].run_at, b.ticks[0].run_at);
    let d = a.ticks[0].run_at.duration_since(ts("2026-01-01T12:01:00Z"));
    assert!(d >= SignedDuration::ZERO && d < SignedDuration::from_secs(30));
}
