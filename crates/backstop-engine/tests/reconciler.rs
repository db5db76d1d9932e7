//! The reconciler's duties on a real SQLite ledger, driven by a manual clock: rescue, expiry,
//! overdue work with its reason, the conservation audit, and the recorded heartbeat.

use backstop_core::audit::DriftRule;
use backstop_core::store::{BeatsParams, GetParams, TimelineParams};
use backstop_core::store::{ClaimParams, EnqueueParams};
use backstop_core::{
    AttemptOutcome, Clock, EventType, KindConfig, ManualClock, NewTask, Status, Store, Target,
    TaskId,
};
use backstop_engine::reconciler::overdue::Why;
use backstop_engine::reconciler::{PassReport, RECONCILER_BEAT};
use backstop_engine::{Engine, EngineOptions};
use backstop_store_sqlite::SqliteStore;
use jiff::SignedDuration;
use std::sync::Arc;
use std::time::Duration;

struct Ledger {
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    path: String,
    _dir: tempfile::TempDir,
}

async fn ledger() -> Ledger {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db").display().to_string();
    let store = SqliteStore::open(&path).await.unwrap();
    Ledger {
        store: Arc::new(store),
        clock: Arc::new(ManualClock::new("2030-01-01T00:00:00Z".parse().unwrap())),
        path,
        _dir: dir,
    }
}

fn push(name: &str) -> KindConfig {
    let mut k = KindConfig::new(
        name,
        Target::HttpPush {
            url: "http://127.0.0.1:9/".into(),
            secret: None,
        },
    );
    k.max_attempts = 2;
    k
}

fn engine(l: &Ledger, kinds: Vec<KindConfig>, opts: EngineOptions) -> Engine {
    let mut b = Engine::builder(l.store.clone())
        .clock(l.clock.clone())
        .options(opts);
    for k in kinds {
        b = b.kind(k);
    }
    b.build().unwrap()
}

async fn put(l: &Ledger, kind: &str, key: &str, run_in: i64, expires_in: Option<i64>) -> TaskId {
    let now = l.clock.now();
    let t = NewTask {
        id: TaskId::new(),
        kind: kind.into(),
        key: key.into(),
        payload: b"{}".to_vec(),
        max_attempts: 2,
        run_at: now + SignedDuration::from_secs(run_in),
        expires_at: expires_in.map(|s| now + SignedDuration::from_secs(s)),
        traceparent: None,
        intake: Default::default(),
        origin: None,
        group: None,
    };
    let id = t.id;
    l.store
        .enqueue(EnqueueParams {
            tasks: vec![t],
            now,
        })
        .await
        .unwrap();
    id
}

fn later(l: &Ledger, secs: i64) {
    l.clock.advance(Duration::from_secs(secs as u64));
}

#[tokio::test]
async fn expired_leases_are_rescued_once_naming_who_held_them() {
    let l = ledger().await;
    let e = engine(&l, vec![push("sms")], EngineOptions::default());
    for i in 0..5 {
        put(&l, "sms", &format!("t{i}"), 0, None).await;
    }
    let now = l.clock.now();
    let claimed = l
        .store
        .claim(ClaimParams {
            kind: "sms".into(),
            limit: 5,
            start: 5,
            owner: "crashed-host".into(),
            now,
            lease_until: now + SignedDuration::from_secs(30),
            max_attempts: 2,
            on_group_failure: Default::default(),
            per_key: None,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 5);
    later(&l, 10);
    assert_eq!(e.reconcile_once().await.rescued, 0, "leases still valid");
    later(&l, 30);
    let r = e.reconcile_once().await;
    assert_eq!(r.rescued, 5);
    assert_eq!(e.reconcile_once().await.rescued, 0, "never rescued twice");
    for c in &claimed {
        let t = l.store.get(GetParams { id: c.id }).await.unwrap().unwrap();
        assert_eq!(t.status, Status::Pending);
        let tl = l.store.timeline(TimelineParams { id: c.id }).await.unwrap();
        let lost: Vec<_> = tl
            .iter()
            .filter(|e| e.outcome == Some(AttemptOutcome::LeaseExpired))
            .collect();
        assert_eq!(lost.len(), 1, "one lost attempt recorded");
        assert!(lost[0].error.as_deref().unwrap().contains("crashed-host"));
        assert_eq!(lost[0].duration_ms, Some(40_000), "held for 40 s");
    }
}

#[tokio::test]
async fn pending_tasks_past_their_deadline_are_compensated() {
    let l = ledger().await;
    let e = engine(&l, vec![push("coupon")], EngineOptions::default());
    let soon = put(&l, "coupon", "soon", 100, Some(50)).await;
    let fine = put(&l, "coupon", "fine", 100, Some(500)).await;
    later(&l, 60);
    assert_eq!(e.reconcile_once().await.expired, 1);
    let t = l.store.get(GetParams { id: soon }).await.unwrap().unwrap();
    assert_eq!(
        (t.status, t.reason.as_deref()),
        (Status::Compensated, Some("expired"))
    );
    let tl = l.store.timeline(TimelineParams { id: soon }).await.unwrap();
    assert!(tl.iter().any(|e| e.kind == EventType::Expired));
    assert_eq!(
        l.store
            .get(GetParams { id: fine })
            .await
            .unwrap()
            .unwrap()
            .status,
        Status::Pending
    );
}

#[tokio::test]
async fn overdue_work_is_found_and_explained_per_kind() {
    let l = ledger().await;
    let mut paused = push("paused.kind");
    paused.paused = true;
    let opts = EngineOptions {
        overdue_after: Duration::from_secs(60),
        ..Default::default()
    };
    // Not running: no process beats, so nobody dispatches `sms`.
    let e = engine(&l, vec![push("sms"), paused], opts);
    let old = put(&l, "sms", "old", 0, None).await;
    put(&l, "sms", "recent", 100, None).await;
    put(&l, "paused.kind", "p", 0, None).await;
    put(&l, "typo.kind", "x", 0, None).await;
    later(&l, 120);
    let r = e.reconcile_once().await;
    let why = |k: &str| {
        r.overdue
            .iter()
            .find(|o| o.kind == k)
            .map(|o| o.why.clone())
    };
    let sms = r.overdue.iter().find(|o| o.kind == "sms").unwrap();
    assert_eq!(sms.count, 1, "due 20 s ago is not overdue yet");
    assert_eq!(sms.sample, vec![old]);
    assert_eq!(why("sms"), Some(Why::NoDispatcher));
    assert_eq!(why("paused.kind"), Some(Why::Paused));
    assert_eq!(why("typo.kind"), Some(Why::UnknownKind));
    let b = r.backlog.iter().find(|b| b.kind == "sms").unwrap();
    assert_eq!((b.pending, b.due, b.overdue), (2, 2, 1));
}

#[tokio::test]
async fn each_pass_is_recorded_as_the_reconcilers_beat() {
    let l = ledger().await;
    let e = engine(&l, vec![push("sms")], EngineOptions::default());
    put(&l, "sms", "a", 0, None).await;
    let r = e.reconcile_once().await;
    let beats = l
        .store
        .beats(BeatsParams {
            prefix: RECONCILER_BEAT.to_string(),
        })
        .await
        .unwrap();
    assert_eq!(beats.len(), 1);
    assert_eq!(beats[0].owner, e.worker());
    assert_eq!(beats[0].at, l.clock.now());
    let stored = PassReport::from_detail(&beats[0].detail).expect("a readable pass");
    assert_eq!(stored, r);
    assert_eq!(stored.audited, 1);
}

#[tokio::test]
async fn the_audit_reports_drift_and_fixes_nothing() {
    let l = ledger().await;
    let opts = EngineOptions {
        audit_batch: 2,
        ..Default::default()
    };
    let e = engine(&l, vec![push("sms")], opts);
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(put(&l, "sms", &format!("t{i}"), 0, None).await);
    }
    // A task marked succeeded with no attempt at all: what a bad manual UPDATE would leave.
    let bad = ids[3];
    let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", l.path))
        .await
        .unwrap();
    sqlx::query("UPDATE backstop_tasks SET status = 2 WHERE id = ?")
        .bind(bad.0.as_bytes().as_slice())
        .execute(&db)
        .await
        .unwrap();
    let mut found = Vec::new();
    let mut audited = 0;
    for _ in 0..3 {
        let r = e.reconcile_once().await;
        audited += r.audited;
        found.extend(r.drift);
    }
    assert_eq!(audited, 5, "three passes of two walk the whole ledger once");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].id, bad);
    assert_eq!(found[0].rule, DriftRule::SucceededWithoutSuccess);
    let t = l.store.get(GetParams { id: bad }).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Succeeded, "reported, never fixed");
    let r = e.reconcile_once().await;
    assert_eq!(r.audited, 2, "the audit starts over after the end");
}
