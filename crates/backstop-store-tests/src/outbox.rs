//! The outbox contract, tested once for every store: an application creates a task with one
//! plain `INSERT` of `kind`, `key` and `payload` inside a transaction of its own, on its own
//! connection, and backstop picks the row up and delivers it like an enqueued task.
//!
//! A store's test file implements [`App`] with a plain database connection (sqlx) that runs
//! the statement docs/outbox.md documents for that database, and calls each case with a fresh,
//! migrated store on the same database:
//!
//! ```ignore
//! #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn a_committed_insert_is_delivered() {
//!     let (store, app, _guard) = fresh().await;
//!     backstop_store_tests::outbox::a_committed_insert_is_delivered(store, &app).await;
//! }
//! ```

use backstop_core::store::{BoxFuture, EnqueueParams, EnqueueResult, Store};
use backstop_core::store::{CountsParams, GetByKeyParams, GetParams, TimelineParams};
use backstop_core::{
    AttemptOutcome, EventType, KindConfig, NewTask, Outcome, RetryPolicy, Status, Target, Task,
    TaskId,
};
use backstop_engine::{Engine, EngineOptions, Handler, handler};
use jiff::{SignedDuration, Timestamp};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

type S = Arc<dyn Store>;

/// The application's side of the contract: connections of its own to the ledger's database.
pub trait App: Send + Sync {
    /// Begins a transaction on a connection of the application's own.
    fn begin(&self) -> BoxFuture<'_, Box<dyn AppTx>>;

    /// Whether two transactions can hold uncommitted inserts at once (PostgreSQL, MySQL).
    /// SQLite has one writer at a time: there a transaction that commits late has begun
    /// first but written last.
    fn concurrent_writers(&self) -> bool;
}

/// One open transaction of the application.
pub trait AppTx: Send {
    /// Runs the documented outbox statement, conflict clause included, for one task whose
    /// payload is `payload` as text (JSON, as applications have it).
    fn insert<'a>(&'a mut self, kind: &'a str, key: &'a str, payload: &'a str)
    -> BoxFuture<'a, ()>;

    /// Runs the documented outbox statement with the `grp` column: the task joins `group`.
    fn insert_in_group<'a>(
        &'a mut self,
        kind: &'a str,
        key: &'a str,
        payload: &'a str,
        group: &'a str,
    ) -> BoxFuture<'a, ()>;

    fn commit(self: Box<Self>) -> BoxFuture<'static, ()>;

    fn rollback(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// JSON as an application writes it: spacing, key order and non-ASCII text kept byte for byte.
const PAYLOAD: &str = "{\"to\": \"+15550100\",\n  \"text\":\"Grüße, 订单 1001 🚚\", \"n\": 1.50}";

/// The kind every case delivers: its budget (5) differs from both the column's old default
/// (8) and the sentinel (0).
const KIND: &str = "outbox.send";
const KIND_ATTEMPTS: u32 = 5;

/// What the handler of [`KIND`] saw: (key, payload, attempt, max_attempts).
type Seen = Arc<Mutex<Vec<(String, Vec<u8>, u32, u32)>>>;

fn kind(name: &str, max_attempts: u32) -> KindConfig {
    let mut k = KindConfig::new(name, Target::InProcess);
    k.max_attempts = max_attempts;
    k.retry = RetryPolicy::Schedule(vec![Duration::from_millis(10)]);
    k.timeout = Duration::from_secs(5);
    k.lease = Duration::from_secs(5);
    k
}

/// The engine under test polls every 20 ms: outbox rows wake no dispatcher, polling finds them.
fn options() -> EngineOptions {
    EngineOptions {
        poll_interval: Duration::from_millis(20),
        rescue_interval: Duration::from_millis(50),
        grace: Duration::from_millis(500),
        ..Default::default()
    }
}

/// A running engine; stopped (gracefully) when dropped at the end of a case via [`stop`].
struct Running {
    stop: oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.handle.await.expect("engine run");
    }
}

fn start(store: &S, kinds: Vec<(KindConfig, Handler)>) -> Running {
    let mut b = Engine::builder(store.clone()).options(options());
    for (k, h) in kinds {
        b = b.handler(k.name.clone(), h).kind(k);
    }
    let engine = b.build().expect("engine");
    let (stop, rx) = oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        engine
            .run(async {
                let _ = rx.await;
            })
            .await
    });
    Running { stop, handle }
}

/// [`KIND`] with a handler that succeeds and records what it was given.
fn recording(seen: &Seen) -> (KindConfig, Handler) {
    let seen = seen.clone();
    let h = handler(move |ctx| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push((
                ctx.key.clone(),
                ctx.payload.clone(),
                ctx.attempt,
                ctx.max_attempts,
            ));
            Outcome::Success
        }
    });
    (kind(KIND, KIND_ATTEMPTS), h)
}

async fn insert_and_commit(app: &dyn App, kind: &str, key: &str, payload: &str) {
    let mut tx = app.begin().await;
    tx.insert(kind, key, payload).await;
    tx.commit().await;
}

async fn by_key(store: &S, kind: &str, key: &str) -> Option<Task> {
    store
        .get_by_key(GetByKeyParams {
            kind: kind.to_string(),
            key: key.to_string(),
        })
        .await
        .expect("get_by_key")
}

/// Waits (up to 10 s) for the task `(kind, key)` to reach `want`.
async fn wait_for(store: &S, kind: &str, key: &str, want: Status) -> Task {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let t = by_key(store, kind, key).await;
        match t {
            Some(t) if t.status == want => return t,
            _ if tokio::time::Instant::now() > deadline => {
                panic!("{kind}/{key} did not become {want}: {t:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// The 48-bit Unix milliseconds of a UUIDv7.
fn v7_millis(id: TaskId) -> i64 {
    let b = id.0.as_bytes();
    b[..6]
        .iter()
        .fold(0i64, |ms, byte| ms << 8 | i64::from(*byte))
}

fn assert_close_to_now(what: &str, t: Timestamp) {
    let off = (Timestamp::now() - t).get_seconds().abs();
    assert!(off < 60, "{what} {t} is {off} s away from now");
}

/// (1) A transaction that rolls back leaves nothing: no task, nothing to claim, nothing run.
pub async fn a_rolled_back_insert_creates_nothing(store: S, app: &dyn App) {
    let mut tx = app.begin().await;
    tx.insert(KIND, "rolled-back", PAYLOAD).await;
    tx.rollback().await;
    assert!(by_key(&store, KIND, "rolled-back").await.is_none());
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        0
    );
    let seen = Seen::default();
    let engine = start(&store, vec![recording(&seen)]);
    tokio::time::sleep(Duration::from_millis(200)).await;
    engine.stop().await;
    assert!(seen.lock().unwrap().is_empty(), "nothing may run");
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        0
    );
}

/// (2) A committed insert is a pending task due now, with every column defaulted as an
/// enqueued task's would be (the budget is the kind's, taken at the first claim); the engine
/// delivers it with the exact payload bytes; its timeline starts with `created`.
pub async fn a_committed_insert_is_delivered(store: S, app: &dyn App) {
    insert_and_commit(app, KIND, "order-1001", PAYLOAD).await;
    let t = by_key(&store, KIND, "order-1001").await.expect("the task");
    assert_eq!(t.status, Status::Pending);
    assert_eq!(
        t.payload,
        PAYLOAD.as_bytes(),
        "payload bytes are kept exactly"
    );
    assert_eq!((t.attempts, t.epoch), (0, 0));
    assert_eq!(
        t.max_attempts, 0,
        "0: the kind's limit, until the first claim"
    );
    assert_eq!(t.expires_at, None);
    assert_eq!(t.traceparent, None);
    assert_eq!((t.lease_owner.as_deref(), t.lease_until), (None, None));
    assert_eq!((t.last_error.as_deref(), t.reason.as_deref()), (None, None));
    assert_close_to_now("created_at", t.created_at);
    assert_eq!(t.run_at, t.created_at, "due at once");
    assert_eq!(t.updated_at, t.created_at);
    let id = t.id.0.as_bytes();
    assert_eq!(id[6] >> 4, 7, "a UUIDv7: {}", t.id);
    assert_eq!(id[8] & 0xc0, 0x80, "the RFC 9562 variant: {}", t.id);
    let drift = v7_millis(t.id) - t.created_at.as_millisecond();
    assert!(drift.abs() < 5_000, "id time {} ms from created_at", drift);
    assert_eq!(
        store.get(GetParams { id: t.id }).await.unwrap().as_ref(),
        Some(&t)
    );
    let tl = store.timeline(TimelineParams { id: t.id }).await.unwrap();
    assert_eq!(tl.len(), 1, "{tl:?}");
    assert_eq!((tl[0].kind, tl[0].at), (EventType::Created, t.created_at));

    let seen = Seen::default();
    let engine = start(&store, vec![recording(&seen)]);
    let done = wait_for(&store, KIND, "order-1001", Status::Succeeded).await;
    engine.stop().await;
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(
            "order-1001".to_string(),
            PAYLOAD.as_bytes().to_vec(),
            1,
            KIND_ATTEMPTS
        )],
        "one attempt, with the exact payload and the kind's budget"
    );
    assert_eq!((done.id, done.attempts), (t.id, 1));
    assert_eq!(
        done.max_attempts, KIND_ATTEMPTS,
        "the claim wrote the kind's budget"
    );
    let tl = store.timeline(TimelineParams { id: t.id }).await.unwrap();
    let kinds: Vec<EventType> = tl.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventType::Created, EventType::Attempt], "{tl:?}");
    assert_eq!(tl[0].at, t.created_at);
    assert_eq!(tl[1].outcome, Some(AttemptOutcome::Succeeded));
}

/// A task inserted without `max_attempts` gets the kind's budget, not a fixed one: a kind of
/// 2 attempts whose handler always asks to retry dead-letters the task after exactly 2.
pub async fn an_inserted_task_gets_the_kinds_attempt_budget(store: S, app: &dyn App) {
    insert_and_commit(app, "outbox.flaky", "f-1", PAYLOAD).await;
    let calls = Arc::new(Mutex::new(Vec::new()));
    let c = calls.clone();
    let flaky = handler(move |ctx| {
        let c = c.clone();
        async move {
            c.lock().unwrap().push((ctx.attempt, ctx.max_attempts));
            Outcome::retry("busy")
        }
    });
    let engine = start(&store, vec![(kind("outbox.flaky", 2), flaky)]);
    let t = wait_for(&store, "outbox.flaky", "f-1", Status::Failed).await;
    engine.stop().await;
    assert_eq!(*calls.lock().unwrap(), vec![(1, 2), (2, 2)]);
    assert_eq!((t.attempts, t.max_attempts), (2, 2));
    assert_eq!(t.reason.as_deref(), Some("attempts exhausted (2 of 2)"));
}

/// (3) A transaction that began first and commits after a later one has been committed and
/// delivered is still picked up: claims select by status and due time, not past a
/// high-water mark of ids or insertion order.
pub async fn a_late_commit_is_still_picked_up(store: S, app: &dyn App) {
    let seen = Seen::default();
    let engine = start(&store, vec![recording(&seen)]);
    let mut late = app.begin().await;
    if app.concurrent_writers() {
        // Its row exists first (earlier id, created_at and run_at), uncommitted.
        late.insert(KIND, "late", PAYLOAD).await;
    }
    insert_and_commit(app, KIND, "early", PAYLOAD).await;
    let early = wait_for(&store, KIND, "early", Status::Succeeded).await;
    // Several polls go by while the late row is uncommitted: nobody sees it.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(by_key(&store, KIND, "late").await.is_none());
    if !app.concurrent_writers() {
        late.insert(KIND, "late", PAYLOAD).await;
    }
    late.commit().await;
    let t = wait_for(&store, KIND, "late", Status::Succeeded).await;
    engine.stop().await;
    if app.concurrent_writers() {
        assert!(
            t.created_at <= early.created_at && v7_millis(t.id) <= v7_millis(early.id),
            "the late row is the older one: {t:?} / {early:?}"
        );
    }
    let keys: Vec<String> = seen.lock().unwrap().iter().map(|s| s.0.clone()).collect();
    assert_eq!(keys, ["early", "late"]);
}

/// (4) The same `(kind, key)` inserted twice with the documented conflict clause is one task:
/// the first payload stays, the second insert is a no-op rather than an error (also when both
/// transactions are open at once), and an API enqueue of the same key and payload answers
/// with the existing task.
pub async fn the_same_kind_and_key_twice_is_one_task(store: S, app: &dyn App) {
    insert_and_commit(app, KIND, "dup", PAYLOAD).await;
    insert_and_commit(app, KIND, "dup", r#"{"other": true}"#).await;
    let t = by_key(&store, KIND, "dup").await.expect("the task");
    assert_eq!(t.payload, PAYLOAD.as_bytes(), "the first insert wins");
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        1
    );

    if app.concurrent_writers() {
        // The second waits for the first's unique-key lock, then finds the row.
        let mut first = app.begin().await;
        first.insert(KIND, "race", PAYLOAD).await;
        let mut second = app.begin().await;
        let racer = tokio::spawn(async move {
            second.insert(KIND, "race", r#"{"other": true}"#).await;
            second
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        first.commit().await;
        racer.await.expect("second insert").commit().await;
        let race = by_key(&store, KIND, "race").await.expect("the task");
        assert_eq!(race.payload, PAYLOAD.as_bytes());
        assert_eq!(
            store.counts(CountsParams::default()).await.unwrap().total(),
            2
        );
    }

    let again = store
        .enqueue(EnqueueParams {
            tasks: vec![NewTask {
                id: TaskId::new(),
                kind: KIND.into(),
                key: "dup".into(),
                payload: PAYLOAD.as_bytes().to_vec(),
                max_attempts: KIND_ATTEMPTS,
                run_at: Timestamp::now(),
                expires_at: None,
                traceparent: None,
                intake: Default::default(),
                origin: None,
                group: None,
            }],
            now: Timestamp::now(),
        })
        .await
        .unwrap();
    assert_eq!(again, vec![EnqueueResult::Existing(t.id)]);

    let seen = Seen::default();
    let engine = start(&store, vec![recording(&seen)]);
    wait_for(&store, KIND, "dup", Status::Succeeded).await;
    if app.concurrent_writers() {
        wait_for(&store, KIND, "race", Status::Succeeded).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    engine.stop().await;
    let dups = seen.lock().unwrap().iter().filter(|s| s.0 == "dup").count();
    assert_eq!(dups, 1, "delivered once");
}

/// The optional columns a store's test set in its documented insert, read back.
pub struct Optional {
    pub max_attempts: u32,
    /// `run_at` is this far after `created_at`.
    pub delay: SignedDuration,
    /// `expires_at` is this far after `created_at`.
    pub expires_in: SignedDuration,
}

/// Checks a task inserted with the optional columns set: what was asked is what is stored,
/// and a task not yet due is not claimed.
pub async fn optional_columns_are_kept(store: S, kind: &str, key: &str, want: Optional) {
    let t = by_key(&store, kind, key).await.expect("the task");
    assert_eq!(t.status, Status::Pending);
    assert_eq!(t.max_attempts, want.max_attempts);
    assert_eq!(t.run_at.duration_since(t.created_at), want.delay, "{t:?}");
    assert_eq!(
        t.expires_at.map(|e| e.duration_since(t.created_at)),
        Some(want.expires_in),
        "{t:?}"
    );
    let seen = Seen::default();
    let mut k = recording(&seen);
    k.0.name = kind.into();
    let engine = start(&store, vec![k]);
    tokio::time::sleep(Duration::from_millis(150)).await;
    engine.stop().await;
    assert!(seen.lock().unwrap().is_empty(), "not due yet");
    let after = by_key(&store, kind, key).await.unwrap();
    assert_eq!((after.status, after.attempts), (Status::Pending, 0));
}

/// An inserted row has no origin (the column defaults to NULL): its `created` event shows
/// none. A broker redelivery of the same `(kind, key)` and payload through the store is the
/// existing task, and leaves a `redelivered` event with its origin.
pub async fn an_inserted_task_has_no_origin_and_takes_redeliveries(store: S, app: &dyn App) {
    insert_and_commit(app, KIND, "origin-1", PAYLOAD).await;
    let t = by_key(&store, KIND, "origin-1").await.expect("the task");
    let tl = store.timeline(TimelineParams { id: t.id }).await.unwrap();
    assert_eq!(tl.len(), 1, "{tl:?}");
    assert_eq!(
        (tl[0].kind, tl[0].origin.as_ref()),
        (EventType::Created, None)
    );
    let origin = r#"{"broker":"amqp","queue":"outbox.in","delivery_count":2}"#;
    let now = Timestamp::now();
    let again = store
        .enqueue(EnqueueParams {
            tasks: vec![NewTask {
                id: TaskId::new(),
                kind: KIND.into(),
                key: "origin-1".into(),
                payload: PAYLOAD.as_bytes().to_vec(),
                max_attempts: KIND_ATTEMPTS,
                run_at: now,
                expires_at: None,
                traceparent: None,
                intake: Default::default(),
                origin: Some(origin.into()),
                group: None,
            }],
            now,
        })
        .await
        .unwrap();
    assert_eq!(again, vec![EnqueueResult::Existing(t.id)]);
    let tl = store.timeline(TimelineParams { id: t.id }).await.unwrap();
    let kinds: Vec<EventType> = tl.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [EventType::Created, EventType::Redelivered],
        "{tl:?}"
    );
    assert_eq!(tl[0].origin, None);
    assert_eq!(
        tl[1].origin,
        Some(serde_json::from_str(origin).expect("JSON"))
    );
    assert_eq!(by_key(&store, KIND, "origin-1").await.as_ref(), Some(&t));
}

/// (7) Producers of one group in transactions of their own, committing after random delays
/// (some rolling back), while a worker drains the group: the worker meets the committed tasks
/// exactly in the order their inserts got their place (each waits for the commit before it),
/// never one ahead of an earlier commit, and no rolled-back task.
pub async fn grouped_inserts_in_concurrent_transactions_run_in_commit_order(
    store: S,
    app: &dyn App,
) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    const PRODUCERS: usize = 30;
    let ticket = AtomicUsize::new(0);
    let done = Arc::new(AtomicBool::new(false));
    let produce = (0..PRODUCERS).map(|i| {
        let ticket = &ticket;
        async move {
            let key = format!("g-{i:02}");
            let mut tx = app.begin().await;
            tx.insert_in_group(KIND, &key, PAYLOAD, "order-1001").await;
            // Its place is taken: the next producer of the group waits for this commit.
            let n = ticket.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis((i as u64 * 7) % 23)).await;
            if i % 6 == 5 {
                tx.rollback().await;
                None
            } else {
                tx.commit().await;
                Some((n, key))
            }
        }
    });
    // The worker runs as a task of its own: a store may wait for the database's write lock
    // on its thread (SQLite's busy handler), and the producers must go on meanwhile.
    let (worker_store, worker_done) = (store.clone(), done.clone());
    let drain = tokio::spawn(async move {
        let (store, done) = (worker_store, worker_done);
        let mut claimed: Vec<(String, i64)> = Vec::new();
        let mut idle_after_done = 0;
        while idle_after_done < 3 {
            let now = Timestamp::now() + SignedDuration::from_secs(1);
            let c = store
                .claim(backstop_core::store::ClaimParams {
                    kind: KIND.into(),
                    limit: 10,
                    start: 10,
                    owner: "drain".into(),
                    now,
                    lease_until: now + SignedDuration::from_secs(30),
                    max_attempts: 3,
                    on_group_failure: Default::default(),
                    per_key: None,
                })
                .await
                .expect("claim");
            assert!(c.len() <= 1, "two tasks of one group at once: {c:?}");
            for c in &c {
                let t = store.get(GetParams { id: c.id }).await.unwrap().unwrap();
                claimed.push((c.key.clone(), t.group_seq.expect("a place")));
                let done = crate::fixtures::completion(
                    c,
                    Status::Succeeded,
                    AttemptOutcome::Succeeded,
                    now,
                );
                crate::fixtures::complete(&*store, vec![done], now).await;
            }
            if c.is_empty() {
                if done.load(Ordering::SeqCst) {
                    idle_after_done += 1;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        claimed
    });
    let produced = futures_util::future::join_all(produce).await;
    done.store(true, Ordering::SeqCst);
    let claimed = drain.await.expect("the worker");
    let mut committed: Vec<(usize, String)> = produced.into_iter().flatten().collect();
    committed.sort();
    let want: Vec<&str> = committed.iter().map(|(_, k)| k.as_str()).collect();
    let got: Vec<&str> = claimed.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        got, want,
        "claimed in commit order, rolled-back tasks absent"
    );
    assert!(
        claimed.windows(2).all(|w| w[0].1 < w[1].1),
        "group_seq ascends in claim order: {claimed:?}"
    );
}
