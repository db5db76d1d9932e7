//! The reconciler's check of schedules on a real SQLite ledger, driven by a manual clock:
//! late ticks, overrunning ticks and silent planning each raise their alert once, and
//! nothing when the condition does not hold; instants without their row are counted and
//! reported; a pass never claims more than it looked at.
//!
//! Passes are run by hand (`reconcile_once`, `plan_schedule`), with no planner running; the
//! alerts they raise are then sent by running the engine for a moment against a sink on
//! loopback, which counts them.

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use backstop_core::schedule::{Progress, ScheduleDef};
use backstop_core::store::{AdvanceScheduleParams, ClaimParams, SchedulesParams};
use backstop_core::{Clock, KindConfig, ManualClock, Status, Store, Target};
use backstop_engine::alerts::{AlertFormat, AlertName, AlertOptions, AlertSink};
use backstop_engine::schedules::{PASS_CAP, ScheduleVerdict};
use backstop_engine::{Engine, EngineOptions};
use backstop_store_sqlite::SqliteStore;
use jiff::{SignedDuration, Timestamp};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KIND: &str = "report.render";
/// A second kind, so that a test can start one schedule's ticks and not another's.
const OTHER: &str = "report.other";

/// A ledger, a stopped clock and a sink; every tick is a pull task that nobody leases unless
/// a test claims it.
struct Setup {
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    url: String,
    got: Arc<Mutex<Vec<serde_json::Value>>>,
    _dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&dir.path().join("t.db").display().to_string())
            .await
            .unwrap(),
    );
    let (url, got) = sink().await;
    Setup {
        store,
        clock: Arc::new(ManualClock::new(ts("12:00:30"))),
        url,
        got,
        _dir: dir,
    }
}

/// `2030-01-01T<hms>Z`.
fn ts(hms: &str) -> Timestamp {
    format!("2030-01-01T{hms}Z").parse().unwrap()
}

fn key(name: &str, hms: &str) -> String {
    format!("{name}@2030-01-01T{hms}Z")
}

fn schedule(name: &str, def: serde_json::Value) -> backstop_core::schedule::Schedule {
    let mut d = serde_json::json!({"kind": KIND, "cron": "* * * * *"});
    d.as_object_mut()
        .unwrap()
        .extend(def.as_object().unwrap().clone());
    serde_json::from_value::<ScheduleDef>(d)
        .unwrap()
        .build(name, |k| k == KIND || k == OTHER)
        .unwrap()
}

fn engine(s: &Setup, schedules: Vec<backstop_core::schedule::Schedule>) -> Engine {
    let mut b = Engine::builder(s.store.clone())
        .kind(KindConfig::new(KIND, Target::Pull))
        .kind(KindConfig::new(OTHER, Target::Pull))
        .clock(s.clock.clone())
        .alerts(AlertOptions {
            sinks: vec![AlertSink {
                name: "ops".into(),
                url: s.url.clone(),
                format: AlertFormat::Generic,
                events: vec![
                    AlertName::TickLate,
                    AlertName::TickOverrun,
                    AlertName::ScheduleSilent,
                    AlertName::AuditDrift,
                ],
                secret: None,
            }],
            window: Duration::from_millis(200),
            failure_rate: None,
        })
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            rescue_interval: Duration::from_millis(100),
            ..Default::default()
        });
    for sc in schedules {
        b = b.schedule(sc);
    }
    b.build().unwrap()
}

/// A sink on loopback, recording every message.
async fn sink() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let app = Router::new().route(
        "/alerts",
        post(move |body: Bytes| {
            let got = g.clone();
            async move {
                got.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).unwrap());
                StatusCode::NO_CONTENT
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/alerts", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (url, got)
}

/// How many `event` alerts the sink has received, and their details.
fn received(s: &Setup, event: &str) -> (u64, Vec<String>) {
    let got = s.got.lock().unwrap();
    let groups: Vec<serde_json::Value> = got
        .iter()
        .flat_map(|b| b["alerts"].as_array().unwrap().clone())
        .filter(|g| g["event"] == event)
        .collect();
    (
        groups.iter().map(|g| g["count"].as_u64().unwrap()).sum(),
        groups
            .iter()
            .map(|g| g["detail"].as_str().unwrap_or_default().to_string())
            .collect(),
    )
}

/// Runs `e` until the sink has received `at_least` messages in all, and a little longer (a
/// second message, if any, would have had its window), then stops it. The alerts the passes
/// by hand raised go out in its first window.
async fn send_alerts(s: &Setup, e: &Engine, at_least: usize) {
    let before = s.got.lock().unwrap().len();
    let runner = e.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let h = tokio::spawn(async move {
        runner
            .run(async {
                let _ = rx.await;
            })
            .await
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.got.lock().unwrap().len() < before + at_least {
        assert!(Instant::now() < deadline, "the sink got no alert");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    stop.send(()).unwrap();
    h.await.unwrap();
}

/// Plans every schedule of `e` at the clock's time, as a planner would.
async fn plan(e: &Engine, names: &[&str]) {
    for n in names {
        e.plan_schedule(n).await.unwrap();
    }
}

/// Starts every due tick of `kind`, as a worker leasing them would.
async fn claim_all(s: &Setup, kind: &str) -> usize {
    let now = s.clock.now();
    s.store
        .claim(ClaimParams {
            kind: kind.into(),
            limit: 100,
            start: 100,
            owner: "worker-1".into(),
            now,
            lease_until: now + SignedDuration::from_hours(1),
            max_attempts: 3,
            on_group_failure: Default::default(),
            per_key: None,
        })
        .await
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_not_started_late_after_its_instant_raises_tick_late_once() {
    let s = setup().await;
    // `s` keeps the default late_after (1 minute); `t` has its tick started in time.
    let e = engine(
        &s,
        vec![
            schedule("s", serde_json::json!({})),
            schedule("t", serde_json::json!({"late_after": "30s", "kind": OTHER})),
        ],
    );
    plan(&e, &["s", "t"]).await;
    s.clock.set(ts("12:01:05"));
    plan(&e, &["s", "t"]).await;
    // t's tick starts (a worker leases it); s's waits.
    s.clock.set(ts("12:01:20"));
    assert_eq!(claim_all(&s, OTHER).await, 1);
    let t = s
        .store
        .get_by_key(backstop_core::store::GetByKeyParams {
            kind: KIND.into(),
            key: key("s", "12:01:00"),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.status, t.attempts),
        (Status::Pending, 0),
        "never started"
    );

    s.clock.set(ts("12:01:59"));
    let r = e.reconcile_once().await;
    assert!(
        r.schedules.late.is_empty(),
        "not late yet: {:?}",
        r.schedules
    );

    s.clock.set(ts("12:02:00"));
    plan(&e, &["s", "t"]).await;
    for _ in 0..3 {
        let r = e.reconcile_once().await;
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.schedules.late, [key("s", "12:01:00")], "t's tick started");
        assert!(r.schedules.overrun.is_empty() && r.schedules.silent.is_empty());
    }
    let listed = e.schedules().await.unwrap();
    let late: Vec<(String, u64)> = listed.iter().map(|v| (v.name.clone(), v.late)).collect();
    assert_eq!(late, [("s".to_string(), 1), ("t".to_string(), 0)]);

    send_alerts(&s, &e, 1).await;
    let (count, details) = received(&s, "tick.late");
    assert_eq!(
        count, 1,
        "one alert for the tick, not one per pass: {details:?}"
    );
    assert!(details[0].contains(&key("s", "12:01:00")), "{details:?}");
    assert!(details[0].contains("late_after = 1m"), "{details:?}");
    assert_eq!(received(&s, "tick.overrun").0, 0);
    assert_eq!(received(&s, "schedule.silent").0, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_running_past_max_runtime_raises_tick_overrun_once() {
    let s = setup().await;
    // Both ticks run from 12:01:10; only s's passes its max_runtime; u has none.
    let e = engine(
        &s,
        vec![
            schedule("s", serde_json::json!({"max_runtime": "2m"})),
            schedule("t", serde_json::json!({"max_runtime": "10m"})),
            schedule("u", serde_json::json!({})),
        ],
    );
    let all = ["s", "t", "u"];
    plan(&e, &all).await;
    s.clock.set(ts("12:01:05"));
    plan(&e, &all).await;
    s.clock.set(ts("12:01:10"));
    assert_eq!(claim_all(&s, KIND).await, 3);
    for at in ["12:02:05", "12:03:05"] {
        s.clock.set(ts(at));
        plan(&e, &all).await;
    }
    s.clock.set(ts("12:03:09"));
    let r = e.reconcile_once().await;
    assert!(r.schedules.overrun.is_empty(), "{:?}", r.schedules);

    s.clock.set(ts("12:03:10"));
    for _ in 0..3 {
        let r = e.reconcile_once().await;
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.schedules.overrun, [key("s", "12:01:00")]);
        assert!(r.schedules.late.is_empty(), "the ticks started");
    }
    // Long past the range of every-minute instants, the running tick is still watched (it is
    // the last tick that was to run; the later ones were skipped as overlapping).
    s.clock.set(ts("12:30:10"));
    plan(&e, &all).await;
    let r = e.reconcile_once().await;
    assert_eq!(
        r.schedules.overrun,
        [key("s", "12:01:00"), key("t", "12:01:00")],
        "t overruns now too, u never"
    );
    let listed = e.schedules().await.unwrap();
    let overrun: Vec<u64> = listed.iter().map(|v| v.overrun).collect();
    assert_eq!(overrun, [1, 1, 0]);

    send_alerts(&s, &e, 1).await;
    let (count, details) = received(&s, "tick.overrun");
    assert_eq!(count, 2, "one per overrunning tick: {details:?}");
    assert!(
        details
            .iter()
            .any(|d| d.contains(&key("s", "12:01:00")) && d.contains("max_runtime = 2m")),
        "{details:?}"
    );
    assert_eq!(received(&s, "tick.late").0, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_nobody_plans_raises_schedule_silent_once_per_silence() {
    let s = setup().await;
    let e = engine(
        &s,
        vec![
            schedule("s", serde_json::json!({})),
            schedule("p", serde_json::json!({"paused": true})),
        ],
    );
    plan(&e, &["s", "p"]).await;
    // 12:01 is owed; silent two minutes later.
    s.clock.set(ts("12:02:59"));
    let r = e.reconcile_once().await;
    assert!(r.schedules.silent.is_empty(), "{:?}", r.schedules);
    s.clock.set(ts("12:03:00"));
    for at in ["12:03:00", "12:04:00", "12:09:00"] {
        s.clock.set(ts(at));
        let r = e.reconcile_once().await;
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(
            r.schedules.silent,
            ["s"],
            "a paused schedule is never silent"
        );
    }
    assert!(
        e.schedules()
            .await
            .unwrap()
            .iter()
            .any(|v| v.name == "s" && v.silent)
    );
    // Running the engine sends the alert; its planner plans again, which ends the silence.
    send_alerts(&s, &e, 1).await;
    let (count, details) = received(&s, "schedule.silent");
    assert_eq!(count, 1, "{details:?}");
    assert!(
        details[0].contains("schedule \"s\"") && details[0].contains("12:01:00Z"),
        "{details:?}"
    );
    let r = e.reconcile_once().await;
    assert!(r.schedules.silent.is_empty(), "planned again");

    // A second silence is a second episode: one more alert.
    s.clock.advance(Duration::from_secs(300));
    for _ in 0..2 {
        assert_eq!(e.reconcile_once().await.schedules.silent, ["s"]);
    }
    send_alerts(&s, &e, 1).await;
    assert_eq!(received(&s, "schedule.silent").0, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instants_planned_without_their_row_are_counted_and_reported_once() {
    let s = setup().await;
    let e = engine(&s, vec![schedule("s", serde_json::json!({}))]);
    plan(&e, &["s"]).await;
    for at in ["12:01:05", "12:02:05", "12:03:05"] {
        s.clock.set(ts(at));
        plan(&e, &["s"]).await;
    }
    let r = e.reconcile_once().await;
    let c = &r.schedules;
    assert_eq!((c.checked, c.missing, c.unchecked), (3, 0, 0), "{c:?}");
    assert_eq!(
        c.before_first_row, 7,
        "instants before the first pass have no row"
    );
    assert_eq!(c.verdict, ScheduleVerdict::Complete);

    // Progress moves on with no rows written: 12:04, 12:05 and 12:06 have none.
    s.clock.set(ts("12:06:05"));
    let record = s
        .store
        .schedules(SchedulesParams::default())
        .await
        .unwrap()
        .pop()
        .unwrap();
    let advanced = s
        .store
        .advance_schedule(AdvanceScheduleParams {
            name: "s".into(),
            expected: record.progress.planned_until,
            progress: Progress {
                planned_until: Some(ts("12:06:05")),
                ..record.progress.clone()
            },
            add_missed: 0,
            add_overlapped: 0,
            now: s.clock.now(),
        })
        .await
        .unwrap();
    assert!(advanced);
    for _ in 0..3 {
        let r = e.reconcile_once().await;
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let c = &r.schedules;
        assert_eq!((c.checked, c.missing, c.unchecked), (6, 3, 0), "{c:?}");
        assert_eq!(
            c.missing_ticks,
            [
                key("s", "12:06:00"),
                key("s", "12:05:00"),
                key("s", "12:04:00")
            ]
        );
        assert_eq!(c.verdict, ScheduleVerdict::Missing);
    }
    assert_eq!(e.schedules().await.unwrap()[0].rows_missing, 3);
    send_alerts(&s, &e, 1).await;
    let (count, details) = received(&s, "audit.drift");
    assert_eq!(count, 1, "{details:?}");
    assert!(
        details[0].contains("3 instant(s) have no row")
            && details[0].contains(&key("s", "12:04:00")),
        "{details:?}"
    );

    // A backfill writes them: the check is complete again.
    e.backfill_schedule("s", ts("12:04:00"), ts("12:06:00"), false)
        .await
        .unwrap();
    let r = e.reconcile_once().await;
    let c = &r.schedules;
    assert_eq!((c.checked, c.missing), (6, 0), "{c:?}");
    assert!(c.missing_ticks.is_empty());
    assert_eq!(c.verdict, ScheduleVerdict::Complete);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_looks_up_at_most_its_cap_and_counts_the_rest_unchecked() {
    let s = setup().await;
    // Ten instants in range each: the cap covers PASS_CAP / 10 schedules, 50 more wait.
    let n = PASS_CAP / 10 + 50;
    let names: Vec<String> = (0..n).map(|i| format!("s{i:03}")).collect();
    let e = engine(
        &s,
        names
            .iter()
            .map(|name| schedule(name, serde_json::json!({})))
            .collect(),
    );
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    plan(&e, &refs).await;
    s.clock.set(ts("12:10:05"));
    plan(&e, &refs).await;

    let r = e.reconcile_once().await;
    let c = &r.schedules;
    assert_eq!(c.schedules, n as u64);
    assert_eq!(c.looked_at, (PASS_CAP / 10) as u64, "{c:?}");
    assert_eq!((c.checked, c.missing), (PASS_CAP as u64, 0));
    assert_eq!(c.unchecked, 500, "never claims more than it looked at");
    assert_eq!(c.verdict, ScheduleVerdict::Partial);
    assert_eq!(c.cursor.as_deref(), Some(names[PASS_CAP / 10 - 1].as_str()));

    // The next pass goes on where this one stopped, and wraps around.
    let r = e.reconcile_once().await;
    let c = &r.schedules;
    assert_eq!((c.looked_at, c.unchecked), ((PASS_CAP / 10) as u64, 500));
    assert_eq!(
        c.cursor.as_deref(),
        Some(names[PASS_CAP / 10 - 51].as_str())
    );
    assert_eq!(c.verdict, ScheduleVerdict::Partial);
}
