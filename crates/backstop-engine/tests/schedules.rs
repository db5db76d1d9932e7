//! Schedules end to end on a real SQLite ledger: every instant one row, outages caught up by
//! policy with one alert, overlap, pause, trigger and backfill.

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use backstop_core::schedule::{ScheduleDef, instant_of};
use backstop_core::store::{ListParams, SchedulesParams};
use backstop_core::{Clock, KindConfig, ManualClock, Outcome, Status, Store, Target, Task};
use backstop_engine::alerts::{AlertFormat, AlertName, AlertOptions, AlertSink};
use backstop_engine::{Engine, EngineOptions, handler};
use backstop_store_sqlite::SqliteStore;
use jiff::Timestamp;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KIND: &str = "report.render";

async fn ledger(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::open(&dir.path().join("t.db").display().to_string())
            .await
            .unwrap(),
    )
}

fn schedule(def: serde_json::Value) -> backstop_core::schedule::Schedule {
    let mut d = serde_json::json!({"kind": KIND});
    d.as_object_mut()
        .unwrap()
        .extend(def.as_object().unwrap().clone());
    serde_json::from_value::<ScheduleDef>(d)
        .unwrap()
        .build("s", |k| k == KIND)
        .unwrap()
}

fn opts() -> EngineOptions {
    EngineOptions {
        poll_interval: Duration::from_millis(20),
        ..Default::default()
    }
}

/// Runs `engine` until the returned sender fires.
fn run(
    engine: &Engine,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let e = engine.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let h = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    (stop, h)
}

async fn ticks(store: &Arc<dyn Store>) -> Vec<Task> {
    let mut all = store
        .list(ListParams {
            kind: Some(KIND.into()),
            limit: 10_000,
            ..Default::default()
        })
        .await
        .unwrap();
    all.sort_by(|a, b| a.key.cmp(&b.key));
    all
}

async fn planned_until(store: &Arc<dyn Store>) -> Option<Timestamp> {
    store
        .schedules(SchedulesParams::default())
        .await
        .unwrap()
        .first()
        .and_then(|r| r.progress.planned_until)
}

/// Waits until the planner has planned up to `at`.
async fn planned_to(store: &Arc<dyn Store>, at: Timestamp) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while planned_until(store).await.is_none_or(|p| p < at) {
        assert!(
            Instant::now() < deadline,
            "the planner did not plan up to {at}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seconds_schedule_writes_one_row_per_instant_and_pause_makes_them_paused_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = ledger(&dir).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new(KIND, Target::InProcess))
        .handler(
            KIND,
            handler(move |_| {
                let r = r.clone();
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    Outcome::Success
                }
            }),
        )
        .schedule(schedule(
            serde_json::json!({"cron": "* * * * * *", "seconds": true}),
        ))
        .options(opts())
        .build()
        .unwrap();
    let (stop, h) = run(&engine);
    tokio::time::sleep(Duration::from_millis(2600)).await;
    engine
        .pause_schedule("s", true, Some("test".into()))
        .await
        .unwrap();
    let paused_at = Timestamp::now();
    tokio::time::sleep(Duration::from_millis(2200)).await;
    engine.pause_schedule("s", false, None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.send(()).unwrap();
    h.await.unwrap();

    let all = ticks(&store).await;
    let instants: Vec<Timestamp> = all
        .iter()
        .map(|t| instant_of("s", &t.key).unwrap())
        .collect();
    assert!(instants.len() >= 5, "{} rows", instants.len());
    for w in instants.windows(2) {
        assert_eq!(
            w[1].duration_since(w[0]).as_secs(),
            1,
            "one row per second, no gap and no repeat: {instants:?}"
        );
    }
    let until = planned_until(&store).await.unwrap();
    assert!(
        until
            .duration_since(*instants.last().unwrap())
            .as_secs_f64()
            < 1.0
    );
    let paused: Vec<&Task> = all
        .iter()
        .filter(|t| t.status == Status::Compensated)
        .collect();
    assert!(!paused.is_empty(), "instants in the pause are rows too");
    for t in &paused {
        assert!(
            t.reason.as_deref().unwrap().starts_with("paused"),
            "{:?}",
            t.reason
        );
        assert!(instant_of("s", &t.key).unwrap() >= paused_at - jiff::SignedDuration::from_secs(1));
        assert_eq!(t.attempts, 0);
    }
    let ran = all.iter().filter(|t| t.status == Status::Succeeded).count();
    assert_eq!(ran, runs.load(Ordering::SeqCst), "each run tick ran once");
    assert!(ran >= 3);
    let p: serde_json::Value = serde_json::from_slice(&all[0].payload).unwrap();
    assert_eq!(
        p["scheduled_for"],
        format!(
            "{}",
            jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", instants[0]).unwrap()
        )
    );
}

/// A `schedule.missed` sink on loopback, recording every message.
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

fn missed_alerts(got: &[serde_json::Value]) -> u64 {
    got.iter()
        .flat_map(|b| b["alerts"].as_array().unwrap().clone())
        .filter(|g| g["event"] == "schedule.missed")
        .map(|g| g["count"].as_u64().unwrap())
        .sum()
}

/// Every two minutes; up at 12:00:30, down until 12:21:05: ten instants (12:02 … 12:20)
/// missed, none on time. Returns the rows and the alerts.
async fn outage(catch_up: serde_json::Value) -> (Vec<Task>, u64) {
    let dir = tempfile::tempdir().unwrap();
    let store = ledger(&dir).await;
    let clock = Arc::new(ManualClock::new("2030-01-01T12:00:30Z".parse().unwrap()));
    let (url, got) = sink().await;
    let mut def = serde_json::json!({"cron": "*/2 * * * *"});
    def.as_object_mut()
        .unwrap()
        .extend(catch_up.as_object().unwrap().clone());
    let build = || {
        Engine::builder(store.clone())
            .kind(KindConfig::new(KIND, Target::InProcess))
            .handler(KIND, handler(|_| async { Outcome::Success }))
            .schedule(schedule(def.clone()))
            .clock(clock.clone())
            .alerts(AlertOptions {
                sinks: vec![AlertSink {
                    name: "ops".into(),
                    url: url.clone(),
                    format: AlertFormat::Generic,
                    events: vec![AlertName::ScheduleMissed],
                    secret: None,
                }],
                window: Duration::from_millis(200),
                failure_rate: None,
            })
            .options(opts())
            .build()
            .unwrap()
    };
    let first = build();
    let (stop, h) = run(&first);
    planned_to(&store, clock.now()).await;
    stop.send(()).unwrap();
    h.await.unwrap();
    assert!(
        ticks(&store).await.is_empty(),
        "nothing before the first instant"
    );

    clock.set("2030-01-01T12:21:05Z".parse().unwrap());
    let second = build();
    let (stop, h) = run(&second);
    planned_to(&store, clock.now()).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while missed_alerts(&got.lock().unwrap()) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Runs finish, and a second alert (if any) would have had a window to show up.
    tokio::time::sleep(Duration::from_millis(600)).await;
    stop.send(()).unwrap();
    h.await.unwrap();
    let alerts = missed_alerts(&got.lock().unwrap());
    (ticks(&store).await, alerts)
}

fn by_status(rows: &[Task]) -> (Vec<String>, Vec<String>) {
    let short = |t: &Task| t.key.trim_start_matches("s@2030-01-01T").to_string();
    let ran = rows
        .iter()
        .filter(|t| t.status != Status::Compensated)
        .map(short)
        .collect();
    let compensated = rows
        .iter()
        .filter(|t| t.status == Status::Compensated)
        .map(short)
        .collect();
    (ran, compensated)
}

const MISSED: &str = "missed: no scheduler ran 2030-01-01T12:00:30Z–2030-01-01T12:21:05Z";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_with_catch_up_skip_is_ten_missed_rows_and_one_alert() {
    let (rows, alerts) = outage(serde_json::json!({})).await;
    assert_eq!(rows.len(), 10);
    let (ran, compensated) = by_status(&rows);
    assert!(ran.is_empty(), "{ran:?}");
    assert_eq!(compensated.len(), 10);
    assert!(
        rows.iter().all(|t| t.reason.as_deref() == Some(MISSED)),
        "{rows:?}"
    );
    assert_eq!(alerts, 1, "one alert per outage, not per instant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_with_catch_up_latest_runs_the_last_instant() {
    let (rows, alerts) = outage(serde_json::json!({"catch_up": "latest"})).await;
    assert_eq!(rows.len(), 10);
    let (ran, compensated) = by_status(&rows);
    assert_eq!(ran, ["12:20:00Z"]);
    assert_eq!(compensated.len(), 9);
    let last = rows.iter().find(|t| t.key.ends_with("12:20:00Z")).unwrap();
    assert_eq!(last.status, Status::Succeeded, "it ran: {last:?}");
    assert!(
        rows.iter()
            .filter(|t| t.status == Status::Compensated)
            .all(|t| t.reason.as_deref().unwrap().starts_with(MISSED))
    );
    assert_eq!(alerts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_with_catch_up_all_runs_up_to_the_cap_in_order() {
    let (rows, alerts) = outage(serde_json::json!({"catch_up": "all", "catchup_max": 3})).await;
    assert_eq!(rows.len(), 10);
    let (ran, compensated) = by_status(&rows);
    assert_eq!(ran, ["12:02:00Z", "12:04:00Z", "12:06:00Z"]);
    assert_eq!(compensated.len(), 7);
    assert!(
        rows.iter()
            .filter(|t| t.status == Status::Compensated)
            .all(|t| t.reason.as_deref() == Some(&*format!("{MISSED} (beyond catchup_max = 3)")))
    );
    assert_eq!(alerts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_skip_compensates_ticks_while_the_last_one_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = ledger(&dir).await;
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (r, m) = (running.clone(), most.clone());
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new(KIND, Target::InProcess))
        .handler(
            KIND,
            handler(move |_| {
                let (r, m) = (r.clone(), m.clone());
                async move {
                    let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                    m.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2300)).await;
                    r.fetch_sub(1, Ordering::SeqCst);
                    Outcome::Success
                }
            }),
        )
        .schedule(schedule(
            serde_json::json!({"cron": "* * * * * *", "seconds": true}),
        ))
        .options(opts())
        .build()
        .unwrap();
    let (stop, h) = run(&engine);
    tokio::time::sleep(Duration::from_millis(5500)).await;
    stop.send(()).unwrap();
    h.await.unwrap();
    assert_eq!(most.load(Ordering::SeqCst), 1, "never two ticks at once");
    let all = ticks(&store).await;
    let skipped: Vec<&Task> = all
        .iter()
        .filter(|t| t.status == Status::Compensated)
        .collect();
    assert!(skipped.len() >= 2, "{all:?}");
    let ran: Vec<&Task> = all
        .iter()
        .filter(|t| t.status != Status::Compensated)
        .collect();
    for t in &skipped {
        let reason = t.reason.as_deref().unwrap();
        assert!(reason.starts_with("overlap: "), "{reason}");
        assert!(
            ran.iter().any(|r| reason.contains(&r.id.to_string())),
            "names the running tick: {reason}"
        );
    }
    let s = store.schedules(SchedulesParams::default()).await.unwrap();
    assert_eq!(s[0].overlapped, skipped.len() as u64, "counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_creates_only_missing_rows_and_a_second_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = ledger(&dir).await;
    let clock = Arc::new(ManualClock::new("2030-01-01T12:30:00Z".parse().unwrap()));
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new(KIND, Target::InProcess))
        .handler(KIND, handler(|_| async { Outcome::Success }))
        .schedule(schedule(serde_json::json!({"cron": "@hourly"})))
        .clock(clock.clone())
        .build()
        .unwrap();
    let from: Timestamp = "2030-01-01T07:00:00Z".parse().unwrap();
    let to: Timestamp = "2030-01-01T12:00:00Z".parse().unwrap();
    let dry = engine.backfill_schedule("s", from, to, true).await.unwrap();
    assert_eq!((dry.instants, dry.created, dry.existing), (6, 6, 0));
    assert!(ticks(&store).await.is_empty(), "a dry run writes nothing");
    let r = engine
        .backfill_schedule("s", from, to, false)
        .await
        .unwrap();
    assert_eq!((r.instants, r.created, r.existing), (6, 6, 0));
    let again = engine
        .backfill_schedule("s", from, to, false)
        .await
        .unwrap();
    assert_eq!((again.created, again.existing), (0, 6));
    let rows = ticks(&store).await;
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|t| t.status == Status::Pending));
    assert_eq!(rows[0].key, "s@2030-01-01T07:00:00Z");
    let future = engine
        .backfill_schedule("s", from, "2030-01-01T13:00:00Z".parse().unwrap(), false)
        .await
        .unwrap_err()
        .to_string();
    assert!(future.contains("is in the future"), "{future}");
    let unknown = engine
        .backfill_schedule("nope", from, to, false)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        unknown.contains("no schedule named \"nope\" (configured: s)"),
        "{unknown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_trigger_is_its_own_row_recorded_as_manual() {
    let dir = tempfile::tempdir().unwrap();
    let store = ledger(&dir).await;
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new(KIND, Target::InProcess))
        .handler(KIND, handler(|_| async { Outcome::Success }))
        .schedule(schedule(
            serde_json::json!({"cron": "@yearly", "payload": {"report": "daily"}}),
        ))
        .build()
        .unwrap();
    let t = engine.trigger_schedule("s", "alice").await.unwrap();
    assert!(t.key.starts_with("s@manual:"), "{}", t.key);
    let task = store
        .get(backstop_core::store::GetParams { id: t.id })
        .await
        .unwrap()
        .unwrap();
    let p: serde_json::Value = serde_json::from_slice(&task.payload).unwrap();
    assert_eq!(p["manual"], true);
    assert_eq!(p["report"], "daily");
    let timeline = store
        .timeline(backstop_core::store::TimelineParams { id: t.id })
        .await
        .unwrap();
    let origin = timeline[0].origin.clone().unwrap();
    assert_eq!(origin["trigger"], "manual");
    assert_eq!(origin["actor"], "alice");
}
