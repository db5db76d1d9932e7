//! Schedules' stored progress: the planner's fenced advance (written only where
//! `planned_until` is still what the pass read), alone or as a batch, a pause by hand, API
//! definitions, listing by name, and the database's clock.

use crate::fixtures::*;
use backstop_core::TaskId;
use backstop_core::schedule::Progress;
use backstop_core::store::*;
use jiff::{SignedDuration, Timestamp};
use std::sync::Arc;

type S = Arc<dyn Store>;

/// Progress planned up to `until`, nothing else set.
fn planned(until: Timestamp) -> Progress {
    Progress {
        planned_until: Some(until),
        ..Default::default()
    }
}

/// Stores `progress` for `name` if its `planned_until` is still `expected`.
async fn advance(
    store: &dyn Store,
    name: &str,
    expected: Option<Timestamp>,
    progress: Progress,
    (add_missed, add_overlapped): (u64, u64),
    now: Timestamp,
) -> bool {
    store
        .advance_schedule(AdvanceScheduleParams {
            name: name.into(),
            expected,
            progress,
            add_missed,
            add_overlapped,
            now,
        })
        .await
        .expect("advance_schedule")
}

/// One item of a batch of advances: `name` planned to `until` if still at `expected`, adding
/// one missed instant.
fn item(name: &str, expected: Option<Timestamp>, until: Timestamp) -> AdvanceScheduleParams {
    AdvanceScheduleParams {
        name: name.into(),
        expected,
        progress: planned(until),
        add_missed: 1,
        add_overlapped: 0,
        now: until,
    }
}

async fn advance_all(store: &dyn Store, items: Vec<AdvanceScheduleParams>) -> Vec<bool> {
    store
        .advance_schedules(items)
        .await
        .expect("advance_schedules")
}

async fn list(store: &dyn Store, names: Option<&[&str]>) -> Vec<ScheduleRecord> {
    store
        .schedules(SchedulesParams {
            names: names.map(|n| n.iter().map(|s| s.to_string()).collect()),
        })
        .await
        .expect("schedules")
}

/// The one stored row of `name`.
async fn one(store: &dyn Store, name: &str) -> ScheduleRecord {
    let mut found = list(store, Some(&[name])).await;
    assert_eq!(found.len(), 1, "{name}: {found:?}");
    found.pop().expect("one")
}

async fn pause(store: &dyn Store, name: &str, paused: bool, note: Option<&str>) -> ScheduleRecord {
    store
        .pause_schedule(PauseScheduleParams {
            name: name.into(),
            paused,
            note: note.map(str::to_string),
            now: at(500),
        })
        .await
        .expect("pause_schedule")
}

async fn define(store: &dyn Store, name: &str, definition: Option<&str>) -> ScheduleRecord {
    store
        .define_schedule(DefineScheduleParams {
            name: name.into(),
            definition: definition.map(str::to_string),
            now: at(600),
        })
        .await
        .expect("define_schedule")
}

pub async fn a_first_advance_creates_the_schedule(store: S) {
    assert_eq!(list(&*store, None).await, []);
    assert!(advance(&*store, "nightly", None, planned(at(60)), (0, 0), at(60)).await);
    assert_eq!(
        list(&*store, None).await,
        [ScheduleRecord {
            name: "nightly".into(),
            progress: planned(at(60)),
            missed: 0,
            overlapped: 0,
            definition: None,
            paused_note: None,
            updated_at: at(60),
        }]
    );
}

pub async fn schedule_advances_are_fenced_by_planned_until(store: S) {
    assert!(advance(&*store, "s", None, planned(at(60)), (2, 1), at(60)).await);
    assert!(
        advance(
            &*store,
            "s",
            Some(at(60)),
            planned(at(120)),
            (3, 4),
            at(120)
        )
        .await
    );
    let after = one(&*store, "s").await;
    assert_eq!(after.progress, planned(at(120)));
    assert_eq!((after.missed, after.overlapped), (5, 5), "counters add up");
    assert_eq!(after.updated_at, at(120));
    // A pass that read the old planned_until lost the race: nothing changes.
    assert!(
        !advance(
            &*store,
            "s",
            Some(at(60)),
            planned(at(180)),
            (7, 7),
            at(180)
        )
        .await
    );
    // So does a first pass that found no row, once another created it.
    assert!(!advance(&*store, "s", None, planned(at(180)), (7, 7), at(180)).await);
    assert_eq!(one(&*store, "s").await, after);
    // An expected planned_until for a schedule never stored creates nothing.
    assert!(
        !advance(
            &*store,
            "other",
            Some(at(60)),
            planned(at(120)),
            (0, 0),
            at(120)
        )
        .await
    );
    assert_eq!(list(&*store, Some(&["other"])).await, []);
    // A pass that changes nothing is still written (MySQL counts matched rows, not changed).
    assert!(
        advance(
            &*store,
            "s",
            Some(at(120)),
            planned(at(120)),
            (0, 0),
            at(120)
        )
        .await
    );
    assert_eq!(one(&*store, "s").await, after);
}

/// Planners in several processes start on a new schedule at once: exactly one first pass is
/// stored; then the same on a row that a pause made before any planning.
pub async fn racing_first_advances_store_exactly_one(store: S) {
    const RACERS: usize = 8;
    for name in ["fresh", "paused-first"] {
        if name == "paused-first" {
            pause(&*store, name, true, Some("before any planning")).await;
        }
        let start = Arc::new(tokio::sync::Barrier::new(RACERS));
        let racers: Vec<_> = (0..RACERS)
            .map(|i| {
                let (store, start) = (store.clone(), start.clone());
                let name = name.to_string();
                tokio::spawn(async move {
                    let progress = planned(at(i as i64 + 1));
                    start.wait().await;
                    let won = advance(&*store, &name, None, progress.clone(), (1, 0), at(1)).await;
                    (won, progress)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for r in racers {
            let (won, progress) = r.await.expect("racer");
            if won {
                winners.push(progress);
            }
        }
        assert_eq!(winners.len(), 1, "{name}: exactly one stored: {winners:?}");
        let stored = one(&*store, name).await;
        assert_eq!(
            stored.progress.planned_until, winners[0].planned_until,
            "{name}"
        );
        assert_eq!(stored.missed, 1, "{name}: the winner's counters alone");
        assert_eq!(stored.progress.paused, name == "paused-first", "{name}");
    }
}

/// A planner's batch: each item is fenced on its own, as if advanced alone — the current
/// ones written, the stale ones left, the new ones created — and nothing else changes.
pub async fn a_batch_of_advances_answers_each_item_on_its_own(store: S) {
    assert_eq!(advance_all(&*store, Vec::new()).await, Vec::<bool>::new());
    for name in ["current", "stale", "taken"] {
        assert!(advance(&*store, name, None, planned(at(60)), (0, 0), at(60)).await);
    }
    pause(&*store, "paused-first", true, Some("before any planning")).await;
    let before_stale = one(&*store, "stale").await;
    let before_taken = one(&*store, "taken").await;
    let written = advance_all(
        &*store,
        vec![
            item("stale", Some(at(30)), at(120)),
            item("current", Some(at(60)), at(120)),
            item("new", None, at(120)),
            item("never-stored", Some(at(60)), at(120)),
            item("taken", None, at(120)),
            item("paused-first", None, at(120)),
        ],
    )
    .await;
    assert_eq!(written, [false, true, true, false, false, true]);
    let current = one(&*store, "current").await;
    assert_eq!(
        (current.progress, current.missed, current.updated_at),
        (planned(at(120)), 1, at(120))
    );
    let new = one(&*store, "new").await;
    assert_eq!((new.progress, new.missed), (planned(at(120)), 1));
    let paused = one(&*store, "paused-first").await;
    assert_eq!(paused.progress.planned_until, Some(at(120)));
    assert!(paused.progress.paused, "an advance never changes the pause");
    assert_eq!(
        one(&*store, "stale").await,
        before_stale,
        "a stale item changes nothing"
    );
    assert_eq!(
        one(&*store, "taken").await,
        before_taken,
        "nor a first one, taken"
    );
    assert_eq!(list(&*store, Some(&["never-stored"])).await, []);
    assert_eq!(list(&*store, None).await.len(), 5);
    // Again with the same items: only the first advances of `new` and `current` moved on.
    let again = advance_all(
        &*store,
        vec![
            item("current", Some(at(120)), at(180)),
            item("new", None, at(180)),
            item("stale", Some(at(60)), at(180)),
        ],
    )
    .await;
    assert_eq!(again, [true, false, true]);
    assert_eq!(one(&*store, "new").await.progress, planned(at(120)));
    assert_eq!(one(&*store, "stale").await.progress, planned(at(180)));
}

/// Planners in several processes advance the same schedules in batches at once, each batch
/// in its own order: exactly one wins each schedule, new or stored, and its progress is the
/// one stored.
pub async fn racing_batches_store_exactly_one_advance_per_schedule(store: S) {
    const RACERS: usize = 6;
    const NAMES: usize = 40;
    let names: Vec<String> = (0..NAMES).map(|i| format!("s{i:02}")).collect();
    // Half are stored already, half are new.
    let stored = |i: usize| i.is_multiple_of(2);
    for (i, name) in names.iter().enumerate() {
        if stored(i) {
            assert!(advance(&*store, name, None, planned(at(60)), (0, 0), at(60)).await);
        }
    }
    let start = Arc::new(tokio::sync::Barrier::new(RACERS));
    let racers: Vec<_> = (0..RACERS)
        .map(|r| {
            let (store, start, names) = (store.clone(), start.clone(), names.clone());
            tokio::spawn(async move {
                // Each racer's own order: rotated, and every other one reversed.
                let mut order: Vec<usize> = (0..NAMES).map(|i| (i + r * 7) % NAMES).collect();
                if !r.is_multiple_of(2) {
                    order.reverse();
                }
                let items = order
                    .iter()
                    .map(|&i| {
                        let expected = stored(i).then(|| at(60));
                        item(&names[i], expected, at(1000 + r as i64))
                    })
                    .collect();
                start.wait().await;
                let written = advance_all(&*store, items).await;
                (r, order, written)
            })
        })
        .collect();
    let mut winners: Vec<Vec<usize>> = vec![Vec::new(); NAMES];
    for racer in racers {
        let (r, order, written) = racer.await.expect("racer");
        assert_eq!(written.len(), NAMES);
        for (i, won) in order.into_iter().zip(written) {
            if won {
                winners[i].push(r);
            }
        }
    }
    for (i, name) in names.iter().enumerate() {
        assert_eq!(
            winners[i].len(),
            1,
            "{name}: exactly one winner: {:?}",
            winners[i]
        );
        let s = one(&*store, name).await;
        assert_eq!(
            s.progress,
            planned(at(1000 + winners[i][0] as i64)),
            "{name}: the winner's progress"
        );
        assert_eq!(s.missed, 1, "{name}: the winner's counters alone");
    }
}

pub async fn a_pause_by_hand_round_trips_and_advances_leave_it(store: S) {
    // Paused before any planning: the row exists with nothing planned.
    let p = pause(&*store, "s", true, Some("alice: maintenance")).await;
    assert!(p.progress.paused);
    assert_eq!(p.progress.planned_until, None);
    assert_eq!(p.paused_note.as_deref(), Some("alice: maintenance"));
    assert_eq!((p.missed, p.overlapped, p.updated_at), (0, 0, at(500)));
    // The first pass still finds it unplanned; its progress says nothing of the pause.
    let mut progress = planned(at(60));
    progress.paused = false;
    assert!(advance(&*store, "s", None, progress, (1, 0), at(60)).await);
    let s = one(&*store, "s").await;
    assert!(s.progress.paused, "an advance never changes the pause");
    assert_eq!(s.paused_note.as_deref(), Some("alice: maintenance"));
    assert_eq!(s.progress.planned_until, Some(at(60)));
    // Resumed: the note goes with the pause, whatever note comes with the resume.
    let r = pause(&*store, "s", false, Some("bob: done")).await;
    assert!(!r.progress.paused);
    assert_eq!(r.paused_note, None);
    assert_eq!(r.progress.planned_until, Some(at(60)), "progress kept");
    assert_eq!(r.missed, 1);
    // An advance with `paused` set does not pause it either.
    let mut progress = planned(at(120));
    progress.paused = true;
    assert!(advance(&*store, "s", Some(at(60)), progress, (0, 0), at(120)).await);
    assert!(!one(&*store, "s").await.progress.paused);
    // Paused again, with a new note; pausing twice keeps the latest.
    pause(&*store, "s", true, Some("carol")).await;
    let p = pause(&*store, "s", true, Some("dave")).await;
    assert_eq!(
        (p.progress.paused, p.paused_note.as_deref()),
        (true, Some("dave"))
    );
    assert_eq!(p.progress.planned_until, Some(at(120)));
}

pub async fn schedule_definitions_are_registered_and_removed_keeping_progress(store: S) {
    let def = r#"{"cron":"0 3 * * *","kind":"report.daily","zone":"Europe/Berlin"}"#;
    // Registered first: a row with nothing planned, which the first pass then plans.
    let d = define(&*store, "api", Some(def)).await;
    assert_eq!(d.definition.as_deref(), Some(def));
    assert_eq!(
        (d.progress.clone(), d.updated_at),
        (Progress::default(), at(600))
    );
    assert!(advance(&*store, "api", None, planned(at(60)), (2, 3), at(60)).await);
    let a = one(&*store, "api").await;
    assert_eq!(
        a.definition.as_deref(),
        Some(def),
        "an advance keeps the definition"
    );
    // Replaced, then removed: progress and counters stay (its ticks stay in the ledger).
    let other = r#"{"cron":"*/5 * * * *","kind":"report.daily"}"#;
    assert_eq!(
        define(&*store, "api", Some(other))
            .await
            .definition
            .as_deref(),
        Some(other)
    );
    let removed = define(&*store, "api", None).await;
    assert_eq!(removed.definition, None);
    assert_eq!(removed.progress, planned(at(60)));
    assert_eq!((removed.missed, removed.overlapped), (2, 3));
    assert_eq!(removed.updated_at, at(600));
    // The planner goes on from where it was.
    assert!(
        advance(
            &*store,
            "api",
            Some(at(60)),
            planned(at(90)),
            (0, 0),
            at(90)
        )
        .await
    );
    assert_eq!(one(&*store, "api").await.definition, None);
}

pub async fn schedules_are_listed_by_name_in_byte_order(store: S) {
    // Byte order: '-' < '.' < digits < upper case < '_' < lower case.
    let names = ["b", "a_1", "a-1", "A", "a.1", "0"];
    for (i, name) in names.iter().enumerate() {
        assert!(advance(&*store, name, None, planned(at(i as i64)), (0, 0), at(1)).await);
    }
    let all: Vec<String> = list(&*store, None)
        .await
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(all, ["0", "A", "a-1", "a.1", "a_1", "b"]);
    let some: Vec<(String, Option<Timestamp>)> = list(&*store, Some(&["b", "missing", "A"]))
        .await
        .into_iter()
        .map(|s| (s.name, s.progress.planned_until))
        .collect();
    assert_eq!(
        some,
        [
            ("A".to_string(), Some(at(3))),
            ("b".to_string(), Some(at(0)))
        ]
    );
    assert_eq!(list(&*store, Some(&["a"])).await, [], "names match whole");
    assert_eq!(list(&*store, Some(&[])).await, []);
}

pub async fn every_field_of_schedule_progress_round_trips(store: S) {
    let ms = |secs: i64, millis: i64| at(secs) + SignedDuration::from_millis(millis);
    let last = TaskId::new();
    let full = Progress {
        planned_until: Some(ms(3600, 999)),
        outage: Some((ms(-7200, 1), ms(-60, 250))),
        last_tick: Some(last),
        waiting: Some(ms(3000, 7)),
        paused: false,
    };
    assert!(
        advance(
            &*store,
            "s",
            None,
            full.clone(),
            (u64::from(u32::MAX) + 1, 0),
            ms(3601, 5)
        )
        .await
    );
    let got = one(&*store, "s").await;
    assert_eq!(got.progress, full);
    assert_eq!(got.missed, u64::from(u32::MAX) + 1, "counters are 64-bit");
    assert_eq!(got.updated_at, ms(3601, 5));
    // Fenced on the exact millisecond stored.
    assert!(
        !advance(
            &*store,
            "s",
            Some(ms(3600, 998)),
            planned(at(4000)),
            (0, 0),
            at(4000)
        )
        .await
    );
    // Cleared again: the outage caught up, nothing waiting, no tick yet.
    assert!(
        advance(
            &*store,
            "s",
            Some(ms(3600, 999)),
            planned(at(4000)),
            (0, 0),
            at(4000)
        )
        .await
    );
    assert_eq!(one(&*store, "s").await.progress, planned(at(4000)));
}

pub async fn the_database_clock_is_near_the_local_clock(store: S) {
    let before = Timestamp::now();
    let now = store.database_now().await.expect("database_now");
    let after = Timestamp::now();
    // `None`: a store without a clock of its own (the caller uses its own).
    if let Some(now) = now {
        let slack = SignedDuration::from_secs(5);
        assert!(
            before - slack <= now && now <= after + slack,
            "the database says {now}, the process {before}..{after}"
        );
        let again = store
            .database_now()
            .await
            .expect("database_now")
            .expect("a clock");
        assert!(
            again >= now - SignedDuration::from_millis(100),
            "{now} then {again}"
        );
    }
}
