use super::*;
use crate::schedule::spec::ScheduleDef;
use crate::task::TaskId;

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

fn at(until: &str) -> Progress {
    Progress {
        planned_until: Some(ts(until)),
        ..Progress::default()
    }
}

fn task(status: Status, attempts: u32, run_at: &str) -> Task {
    let t = ts(run_at);
    Task {
        id: TaskId::new(),
        kind: "k".into(),
        key: "s@x".into(),
        payload: Vec::new(),
        status,
        attempts,
        max_attempts: 3,
        run_at: t,
        expires_at: None,
        lease_owner: None,
        lease_until: None,
        epoch: 0,
        traceparent: None,
        last_error: None,
        reason: None,
        created_at: t,
        updated_at: t,
        group: None,
        group_seq: None,
        parked: false,
    }
}

#[test]
fn the_range_is_the_latest_instants_and_further_back_while_a_tick_could_be_late() {
    // Every minute: 1 min late_after + 5 min watch reach back 6 minutes, fewer than RANGE_MIN.
    let s = schedule(serde_json::json!({}));
    let r = range(&s, &at("2030-01-01T12:30:10Z"), None);
    assert_eq!(r.len(), RANGE_MIN);
    assert_eq!(r[0], ts("2030-01-01T12:30:00Z"), "newest first");
    assert_eq!(r[9], ts("2030-01-01T12:21:00Z"));
    // Every second: back 6 minutes, capped.
    let s = schedule(serde_json::json!({"cron": "* * * * * *", "seconds": true}));
    let r = range(&s, &at("2030-01-01T12:30:10Z"), None);
    assert_eq!(r.len(), RANGE_MAX);
    // Every 10 s with a 2 minute grace: 2 + 5 minutes back, 42 instants.
    let s = schedule(
        serde_json::json!({"cron": "*/10 * * * * *", "seconds": true, "late_after": "2m"}),
    );
    let r = range(&s, &at("2030-01-01T12:30:00Z"), None);
    assert_eq!(r.len(), 43, "12:23:00 through 12:30:00");
    assert_eq!(*r.last().unwrap(), ts("2030-01-01T12:23:00Z"));
}

#[test]
fn the_range_leaves_out_the_waiting_instant_and_what_retention_may_have_deleted() {
    let s = schedule(serde_json::json!({}));
    let mut p = at("2030-01-01T12:30:10Z");
    p.waiting = Some(ts("2030-01-01T12:30:00Z"));
    let r = range(&s, &p, Some(ts("2030-01-01T12:27:00Z")));
    assert_eq!(
        r,
        vec![
            ts("2030-01-01T12:29:00Z"),
            ts("2030-01-01T12:28:00Z"),
            ts("2030-01-01T12:27:00Z")
        ]
    );
    assert!(
        range(&s, &Progress::default(), None).is_empty(),
        "never planned"
    );
}

#[test]
fn the_range_names_the_planners_instants_on_a_dst_day() {
    // Spring forward in Berlin: 02:30 does not exist; the planner's instant is 03:00 CEST.
    let s = schedule(serde_json::json!({"cron": "30 2 * * *", "timezone": "Europe/Berlin"}));
    let r = range(&s, &at("2026-03-29T12:00:00Z"), None);
    let (planned, _) =
        s.times
            .between(ts("2026-03-19T00:00:00Z"), ts("2026-03-29T12:00:00Z"), 1000);
    let planned: Vec<Timestamp> = planned.into_iter().rev().map(|i| i.at).collect();
    assert_eq!(r, planned[..RANGE_MIN]);
    assert_eq!(r[0], ts("2026-03-29T01:00:00Z"));
}

#[test]
fn rows_missing_after_the_oldest_row_are_missing_and_before_it_unknown() {
    let r: Vec<Timestamp> = (0..6)
        .map(|i| ts("2030-01-01T12:30:00Z") - SignedDuration::from_mins(i))
        .collect();
    // 12:30 and 12:28 have no row; 12:27 is the oldest with one; 12:26 and 12:25 have none.
    let has = |t: Timestamp| [ts("2030-01-01T12:29:00Z"), ts("2030-01-01T12:27:00Z")].contains(&t);
    let c = rows(&r, has);
    assert_eq!(
        c.missing,
        vec![ts("2030-01-01T12:30:00Z"), ts("2030-01-01T12:28:00Z")]
    );
    assert_eq!((c.checked, c.before_first_row), (4, 2));
    let none = rows(&r, |_| false);
    assert_eq!((none.checked, none.before_first_row), (0, 6));
    assert!(none.missing.is_empty());
    let all = rows(&r, |_| true);
    assert_eq!((all.checked, all.before_first_row), (6, 0));
    assert!(all.missing.is_empty());
}

#[test]
fn a_schedule_is_silent_when_an_owed_instant_went_unplanned_for_two_minutes() {
    let s = schedule(serde_json::json!({}));
    let p = at("2030-01-01T12:00:10Z");
    let owed = owed(&s, &p);
    assert_eq!(owed, Some(ts("2030-01-01T12:01:00Z")));
    let written = ts("2030-01-01T12:00:10Z");
    // 12:01 is owed; 2 minutes later is the edge.
    assert!(!silent(&s, &p, owed, written, ts("2030-01-01T12:02:59Z")));
    assert!(silent(&s, &p, owed, written, ts("2030-01-01T12:03:00Z")));
    // Written recently (a catch-up in several passes): not silent yet.
    assert!(!silent(
        &s,
        &p,
        owed,
        ts("2030-01-01T12:02:00Z"),
        ts("2030-01-01T12:03:00Z")
    ));
    // Paused (by hand or by its configuration), or never planned: never silent.
    let later = ts("2030-01-02T00:00:00Z");
    let mut paused = p.clone();
    paused.paused = true;
    assert!(!silent(&s, &paused, owed, written, later));
    let configured = schedule(serde_json::json!({"paused": true}));
    assert!(!silent(&configured, &p, owed, written, later));
    assert_eq!(super::owed(&s, &Progress::default()), None);
    assert!(!silent(&s, &Progress::default(), None, written, later));
    // A daily schedule planned this morning is not silent in the afternoon.
    let daily = schedule(serde_json::json!({"cron": "0 2 * * *"}));
    let morning = at("2030-01-01T02:00:01Z");
    let owed = super::owed(&daily, &morning);
    assert_eq!(owed, Some(ts("2030-01-02T02:00:00Z")));
    assert!(!silent(
        &daily,
        &morning,
        owed,
        ts("2030-01-01T02:00:01Z"),
        ts("2030-01-01T14:00:00Z")
    ));
}

#[test]
fn a_tick_is_late_only_pending_and_never_started_past_its_grace() {
    let s = schedule(serde_json::json!({"late_after": "30s"}));
    let due = "2030-01-01T12:00:00Z";
    let now = ts("2030-01-01T12:00:30Z");
    assert!(is_late(&s, &task(Status::Pending, 0, due), now));
    assert!(!is_late(
        &s,
        &task(Status::Pending, 0, due),
        ts("2030-01-01T12:00:29Z")
    ));
    assert!(
        !is_late(&s, &task(Status::Pending, 1, due), now),
        "it started once"
    );
    assert!(!is_late(&s, &task(Status::Running, 1, due), now));
    assert!(!is_late(&s, &task(Status::Compensated, 0, due), now));
}

#[test]
fn a_running_tick_overruns_max_runtime_after_its_attempt_started() {
    let s = schedule(serde_json::json!({"max_runtime": "2m"}));
    let t = task(Status::Running, 1, "2030-01-01T12:00:00Z");
    assert!(!may_overrun(&s, &t, ts("2030-01-01T12:01:59Z")));
    assert!(may_overrun(&s, &t, ts("2030-01-01T12:02:00Z")));
    assert!(!overran(
        &s,
        ts("2030-01-01T12:00:30Z"),
        ts("2030-01-01T12:02:29Z")
    ));
    assert!(overran(
        &s,
        ts("2030-01-01T12:00:30Z"),
        ts("2030-01-01T12:02:30Z")
    ));
    let unbounded = schedule(serde_json::json!({}));
    assert!(!may_overrun(&unbounded, &t, ts("2031-01-01T00:00:00Z")));
    assert!(!overran(
        &unbounded,
        ts("2030-01-01T12:00:30Z"),
        ts("2031-01-01T00:00:00Z")
    ));
}
