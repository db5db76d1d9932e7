//! What MySQL / MariaDB could get wrong that the conformance suite does not look at: byte-exact
//! keys and payloads (no collation, no PAD SPACE), prefixes that keep ledgers apart, and a
//! schema newer than this build.

mod common;

use backstop_core::store::*;
use backstop_core::*;
use backstop_store_mysql::{MysqlOptions, MysqlStore};
use common::PrefixGuard;
use jiff::Timestamp;

fn task(kind: &str, key: &str, payload: &[u8]) -> NewTask {
    NewTask {
        id: TaskId::new(),
        kind: kind.into(),
        key: key.into(),
        payload: payload.to_vec(),
        max_attempts: 3,
        run_at: Timestamp::UNIX_EPOCH,
        expires_at: None,
        traceparent: None,
        intake: Default::default(),
        origin: None,
        group: None,
    }
}

async fn put(store: &MysqlStore, t: NewTask) -> EnqueueResult {
    store
        .enqueue(EnqueueParams {
            tasks: vec![t],
            now: Timestamp::UNIX_EPOCH,
        })
        .await
        .unwrap()
        .remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_payloads_compare_byte_for_byte() {
    if common::skip() {
        return;
    }
    let guard = PrefixGuard::new();
    let store = guard.store().await;
    // Case, trailing spaces and accents make different business ids.
    for key in [
        "order-1",
        "Order-1",
        "order-1 ",
        "ordér-1",
        "order-1\u{3000}",
    ] {
        assert!(
            matches!(
                put(&store, task("k", key, b"{}")).await,
                EnqueueResult::Created(_)
            ),
            "{key:?}"
        );
    }
    let found = store
        .get_by_key(GetByKeyParams {
            kind: "k".into(),
            key: "order-1 ".into(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.key, "order-1 ");
    // Bytes that are not UTF-8 (nor JSON) round-trip exactly and compare exactly.
    let raw = b"\x00\xff\xfe binary \r\n\x00";
    let id = put(&store, task("bin", "b", raw)).await.id();
    assert_eq!(
        store.get(GetParams { id }).await.unwrap().unwrap().payload,
        raw
    );
    assert_eq!(
        put(&store, task("bin", "b", raw)).await,
        EnqueueResult::Existing(id)
    );
    assert_eq!(
        put(&store, task("bin", "b", b"\x00\xff\xfe binary \r\n")).await,
        EnqueueResult::Conflict(id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefixes_keep_ledgers_apart() {
    if common::skip() {
        return;
    }
    let one = PrefixGuard::new();
    let two = PrefixGuard::new();
    let a = one.store().await;
    let b = two.store().await;
    let id = put(&a, task("k", "same", b"{}")).await.id();
    assert!(matches!(
        put(&b, task("k", "same", b"{\"other\":1}")).await,
        EnqueueResult::Created(_)
    ));
    assert!(b.get(GetParams { id }).await.unwrap().is_none());
    assert_eq!(a.counts(CountsParams::default()).await.unwrap().total(), 1);
    assert_eq!(a.prefix(), one.prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_schema_is_refused() {
    if common::skip() {
        return;
    }
    let guard = PrefixGuard::new();
    let store = guard.store().await;
    let newer = MysqlStore::known_schema_version() + 1;
    let url = MysqlOptions::from_url(&guard.url).unwrap().url;
    let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {}schema (version, name, applied_at) VALUES (?, 'future', 0)",
        guard.prefix
    )))
    .bind(newer)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    match store.migrate().await {
        Err(StoreError::SchemaTooNew { found, known }) => {
            assert_eq!((found, known), (newer, newer - 1));
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}

#[tokio::test]
async fn unreachable_servers_and_bad_options_fail_to_open() {
    // No server needed: nothing listens on port 1.
    let err = MysqlStore::open("mysql://root:hunter2@127.0.0.1:1/db")
        .await
        .err()
        .expect("no server");
    assert!(matches!(err, StoreError::Open(_)), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    let mut opts = MysqlOptions::from_url("mysql://root@127.0.0.1:1/db").unwrap();
    opts.prefix = "x`; DROP TABLE t; --".into();
    assert!(matches!(
        MysqlStore::connect(opts).await,
        Err(StoreError::Open(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_batch_mixes_finishes_retries_and_stale_completions() {
    if common::skip() {
        return;
    }
    let guard = PrefixGuard::new();
    let store = guard.store().await;
    let now = Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(100);
    for key in ["a", "b", "c"] {
        put(&store, task("k", key, b"{}")).await;
    }
    let claimed = store
        .claim(ClaimParams {
            kind: "k".into(),
            limit: 10,
            start: 10,
            owner: "w".into(),
            now,
            lease_until: now + jiff::SignedDuration::from_secs(30),
            max_attempts: 3,
            on_group_failure: Default::default(),
            per_key: None,
        })
        .await
        .unwrap();
    let by_key = |k: &str| claimed.iter().find(|c| c.key == k).unwrap().clone();
    let (a, b, c) = (by_key("a"), by_key("b"), by_key("c"));
    let done = |t: &ClaimedTask, status, outcome| Completion {
        lease: LeaseRef {
            id: t.id,
            epoch: t.epoch,
        },
        attempt: t.attempt,
        status,
        run_at: None,
        last_error: None,
        reason: None,
        outcome,
        http_status: Some(200),
        note: None,
        started_at: now,
        ended_at: now + jiff::SignedDuration::from_millis(7),
        worker: "w".into(),
    };
    let mut retry = done(&b, Status::Pending, AttemptOutcome::Retry);
    retry.run_at = Some(now + jiff::SignedDuration::from_secs(60));
    retry.last_error = Some("HTTP 503".into());
    retry.http_status = Some(503);
    let mut wrong_epoch = done(&c, Status::Succeeded, AttemptOutcome::Succeeded);
    wrong_epoch.lease.epoch += 1;
    let twice = done(&a, Status::Failed, AttemptOutcome::Failed);
    let r = store
        .complete(CompleteParams {
            starts: None,
            completions: vec![
                done(&a, Status::Succeeded, AttemptOutcome::Succeeded),
                retry,
                twice.clone(),
                wrong_epoch.clone(),
            ],
            claims: Vec::new(),
            now: now + jiff::SignedDuration::from_secs(1),
        })
        .await
        .unwrap();
    assert_eq!(r.stale, vec![twice.lease, wrong_epoch.lease]);
    let ta = store.get(GetParams { id: a.id }).await.unwrap().unwrap();
    assert_eq!((ta.status, ta.lease_owner), (Status::Succeeded, None));
    let tb = store.get(GetParams { id: b.id }).await.unwrap().unwrap();
    assert_eq!(tb.status, Status::Pending);
    assert_eq!(tb.run_at, now + jiff::SignedDuration::from_secs(60));
    assert_eq!(tb.last_error.as_deref(), Some("HTTP 503"));
    assert_eq!(
        store
            .get(GetParams { id: c.id })
            .await
            .unwrap()
            .unwrap()
            .status,
        Status::Running
    );
    let kinds = |tl: &[Event]| tl.iter().map(|e| e.kind).collect::<Vec<_>>();
    let tla = store.timeline(TimelineParams { id: a.id }).await.unwrap();
    assert_eq!(
        kinds(&tla),
        vec![
            EventType::Created,
            EventType::Attempt,
            EventType::StaleCompletion
        ]
    );
    assert_eq!(tla[1].outcome, Some(AttemptOutcome::Succeeded));
    assert_eq!(tla[1].duration_ms, Some(7));
    assert_eq!(tla[1].http_status, Some(200));
    let tlb = store.timeline(TimelineParams { id: b.id }).await.unwrap();
    assert_eq!(kinds(&tlb), vec![EventType::Created, EventType::Attempt]);
    assert_eq!(tlb[1].outcome, Some(AttemptOutcome::Retry));
    assert_eq!(tlb[1].attempt, Some(1));
    assert_eq!(tlb[1].http_status, Some(503));
    assert_eq!(tlb[1].error.as_deref(), Some("HTTP 503"));
    let tlc = store.timeline(TimelineParams { id: c.id }).await.unwrap();
    assert!(tlc.iter().any(|e| e.kind == EventType::StaleCompletion));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_drift_is_found() {
    if common::skip() {
        return;
    }
    let guard = PrefixGuard::new();
    let store: std::sync::Arc<dyn backstop_core::Store> = std::sync::Arc::new(guard.store().await);
    let (url, prefix) = (guard.options().url, guard.prefix.clone());
    backstop_store_tests::cases::an_injected_drift_is_found(store, move |id| {
        Box::pin(async move {
            let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
            let sql = format!("UPDATE {prefix}tasks SET attempts = attempts + 1 WHERE id = ?");
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(id.0.as_bytes().to_vec())
                .execute(&pool)
                .await
                .unwrap();
        })
    })
    .await;
}

/// Migration 8 adds columns with plain `ADD COLUMN` (MySQL 8 has no `IF NOT EXISTS` for it):
/// interrupted after its first statement, the next run takes the column already there as done
/// and adds the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_intake_migration_is_finished_by_the_next_run() {
    if common::skip() {
        return;
    }
    let guard = PrefixGuard::new();
    let store = guard.store().await;
    let url = MysqlOptions::from_url(&guard.url).unwrap().url;
    let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
    let p = &guard.prefix;
    // As a run that stopped after adding tasks.origin left it (so none of the later
    // migrations was recorded either).
    for sql in [
        format!("ALTER TABLE {p}events DROP COLUMN origin"),
        format!("DELETE FROM {p}schema WHERE version >= 8"),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
    store.migrate().await.expect("the migration finishes");
    let mut t = task("k", "o", b"{}");
    t.origin = Some(r#"{"queue":"q"}"#.into());
    let id = t.id;
    assert_eq!(put(&store, t.clone()).await, EnqueueResult::Created(id));
    t.id = TaskId::new();
    assert_eq!(put(&store, t).await, EnqueueResult::Existing(id));
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    let kinds: Vec<EventType> = tl.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventType::Created, EventType::Redelivered]);
    assert_eq!(tl[1].origin, Some(serde_json::json!({"queue": "q"})));
}
