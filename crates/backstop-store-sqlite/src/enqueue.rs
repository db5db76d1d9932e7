//! Enqueue with group commit (the [`Enqueue`] impl): concurrent callers' tasks are written in one `BEGIN IMMEDIATE`
//! transaction and each caller is answered only after that commit is durable. Inbound
//! callbacks (a record and its task) ride the same group commits.

use crate::Inner;
use crate::SqliteStore;
use crate::groups::Place;
use crate::raw::{self, Db, Stmt, Value};
use crate::row::jiff_ms::to_ms;
use crate::row::{id_bytes, parse_id, status_code};
use crate::shapes::chunks;
use crate::stmt_cache::StmtCache;
use backstop_core::group::PARKED_RUN_AT;
use backstop_core::store::{BoxFuture, Enqueue, EnqueueParams, EnqueueResult};
use backstop_core::{CallbackCheck, NewTask, RecordCallbackParams, RecordedCallback, StoreError};
use sqlx::SqliteConnection;
use std::sync::{LazyLock, Weak};
use tokio::sync::{mpsc, oneshot};

impl Enqueue for SqliteStore {
    fn enqueue(&self, p: EnqueueParams) -> BoxFuture<'_, Result<Vec<EnqueueResult>, StoreError>> {
        Box::pin(self.inner.committer.submit(p))
    }
}

/// Tasks per group-commit transaction; one large request is never split across commits.
const GROUP_LIMIT: usize = 4000;

/// One caller's write waiting for the next group commit.
enum Request {
    Enqueue {
        params: EnqueueParams,
        reply: oneshot::Sender<Result<Vec<EnqueueResult>, StoreError>>,
    },
    /// An inbound callback's record, with its task when verified (see `callbacks`).
    Callback {
        params: Box<RecordCallbackParams>,
        reply: oneshot::Sender<Result<RecordedCallback, StoreError>>,
    },
}

impl Request {
    /// How many rows it writes, roughly, against [`GROUP_LIMIT`].
    fn size(&self) -> usize {
        match self {
            Request::Enqueue { params, .. } => params.tasks.len(),
            Request::Callback { .. } => 2,
        }
    }

    fn fail(self, e: StoreError) {
        match self {
            Request::Enqueue { reply, .. } => {
                let _ = reply.send(Err(e));
            }
            Request::Callback { reply, .. } => {
                let _ = reply.send(Err(e));
            }
        }
    }
}

/// What a group commit answers each request.
enum Answer {
    Enqueued(Vec<EnqueueResult>),
    Recorded(RecordedCallback),
}

/// The group-commit queue in front of the writer.
pub(crate) struct Committer {
    tx: mpsc::UnboundedSender<Request>,
}

impl Committer {
    pub(crate) fn start(inner: Weak<Inner>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(inner, rx));
        Committer { tx }
    }

    pub(crate) async fn submit(
        &self,
        params: EnqueueParams,
    ) -> Result<Vec<EnqueueResult>, StoreError> {
        if params.tasks.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, rx) = oneshot::channel();
        self.send(Request::Enqueue { params, reply })?;
        rx.await
            .map_err(|_| StoreError::Database("the store closed before committing".into()))?
    }

    /// Records a callback (and creates its task) in the next group commit.
    pub(crate) async fn record_callback(
        &self,
        params: RecordCallbackParams,
    ) -> Result<RecordedCallback, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Request::Callback {
            params: Box::new(params),
            reply,
        })?;
        rx.await
            .map_err(|_| StoreError::Database("the store closed before committing".into()))?
    }

    fn send(&self, r: Request) -> Result<(), StoreError> {
        self.tx
            .send(r)
            .map_err(|_| StoreError::Database("the store is closed".into()))
    }
}

async fn run(inner: Weak<Inner>, mut rx: mpsc::UnboundedReceiver<Request>) {
    while let Some(first) = rx.recv().await {
        let mut size = first.size();
        let mut group = vec![first];
        while size < GROUP_LIMIT {
            match rx.try_recv() {
                Ok(r) => {
                    size += r.size();
                    group.push(r);
                }
                Err(_) => break,
            }
        }
        let Some(inner) = inner.upgrade() else { break };
        let result = {
            match inner.lock_writer().await {
                Ok(mut w) => write_group(&mut w, &inner.stmts, &group).await,
                Err(e) => Err(e),
            }
        };
        match result {
            Ok(answers) => {
                for (req, answer) in group.into_iter().zip(answers) {
                    match (req, answer) {
                        (Request::Enqueue { reply, .. }, Answer::Enqueued(r)) => {
                            let _ = reply.send(Ok(r));
                        }
                        (Request::Callback { reply, .. }, Answer::Recorded(r)) => {
                            let _ = reply.send(Ok(r));
                        }
                        (req, _) => req.fail(StoreError::Database(
                            "a group commit answered out of order".into(),
                        )),
                    }
                }
            }
            Err(e) => {
                for req in group {
                    req.fail(e.replicate());
                }
            }
        }
    }
}

/// Rows per INSERT, largest first. Rows of one statement share SQLite's open cursors, so the
/// appends to the table and to the time-ordered indexes skip the descent from the root that a
/// one-row statement pays; past 32 rows, preparing the statement costs more than that saves.
pub(crate) const SHAPES: &[usize] = &[32, 8, 2, 1];
pub(crate) const COLS: usize = 15;

/// One INSERT per shape; each row binds (id, kind, key, payload, max_attempts, run_at,
/// expires_at, traceparent, status, reason, origin, now, grp, grp_seq, parked_run_at) — see
/// [`row`]. A grouped row comes placed by [`crate::groups::place`]; one without a place
/// (a callback's task) is placed by the migration's insert trigger, as an outbox row is.
pub(crate) static INSERT_SQL: LazyLock<Vec<String>> = LazyLock::new(|| {
    SHAPES
        .iter()
        .map(|rows| {
            let values = (0..*rows)
                .map(|r| {
                    let p: Vec<String> = (1..=COLS).map(|c| format!("?{}", r * COLS + c)).collect();
                    let (status, reason, origin, now) = (&p[8], &p[9], &p[10], &p[11]);
                    // The intake decides the status: pending (0), a dead letter at once (3,
                    // Intake::Failed, its reason also its last error) or compensated (4,
                    // Intake::Compensated). created_at and updated_at are both `now`.
                    // grp_live is the group again (migration 0016), bound once.
                    format!(
                        "({}, {status}, {reason}, CASE WHEN {status} = 3 THEN {reason} END, \
                         {origin}, {now}, {now}, {}, {})",
                        p[..8].join(", "),
                        p[12..].join(", "),
                        p[12]
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            // OR FAIL: no statement journal; an error rolls the whole transaction back anyway.
            format!(
                "INSERT OR FAIL INTO backstop_tasks (id, kind, key, payload, max_attempts, run_at, \
                 expires_at, traceparent, status, reason, last_error, origin, created_at, \
                 updated_at, grp, grp_seq, parked_run_at, grp_live) VALUES {values} \
                 ON CONFLICT (kind, key) DO NOTHING"
            )
        })
        .collect()
});

/// The values of one row of [`INSERT_SQL`]: `t`, created at `now` (epoch milliseconds), in
/// its group's `place` if given (parked: `run_at` is the sentinel, its own kept aside).
pub(crate) fn row(t: &NewTask, now: i64, place: Option<Place>) -> [Value<'_>; COLS] {
    let run_at = to_ms(t.run_at);
    let parked = place.is_some_and(|p| p.parked);
    [
        id_bytes(&t.id).into(),
        t.kind.as_str().into(),
        t.key.as_str().into(),
        t.payload.as_slice().into(),
        i64::from(t.max_attempts).into(),
        Value::Int(if parked { to_ms(PARKED_RUN_AT) } else { run_at }),
        t.expires_at.map(to_ms).into(),
        t.traceparent.as_deref().into(),
        Value::Int(status_code(t.intake.status())),
        t.intake.reason().into(),
        t.origin.as_deref().into(),
        Value::Int(now),
        t.group.as_deref().into(),
        place.map(|p| p.seq).into(),
        parked.then_some(run_at).into(),
    ]
}

pub(crate) const EXISTING: &str =
    "SELECT id, payload FROM backstop_tasks WHERE kind = ?1 AND key = ?2";

/// A repeat with an origin (a broker's redelivery) on the existing task's timeline.
const REDELIVERED: &str =
    "INSERT INTO backstop_events (task_id, type, at, origin) VALUES (?1, 'redelivered', ?2, ?3)";

/// Writes a group in one transaction: first every enqueued task (cut into shapes together,
/// whatever each request holds), then each callback with its task; answers in group order.
async fn write_group(
    conn: &mut SqliteConnection,
    cache: &StmtCache,
    group: &[Request],
) -> Result<Vec<Answer>, StoreError> {
    let tasks: Vec<(&NewTask, i64)> = group
        .iter()
        .filter_map(|r| match r {
            Request::Enqueue { params, .. } => Some(params),
            Request::Callback { .. } => None,
        })
        .flat_map(|p| {
            let now = to_ms(p.now);
            p.tasks.iter().map(move |t| (t, now))
        })
        .collect();
    let callbacks: Vec<&RecordCallbackParams> = group
        .iter()
        .filter_map(|r| match r {
            Request::Callback { params, .. } => Some(&**params),
            Request::Enqueue { .. } => None,
        })
        .collect();
    let (results, recorded) = raw::write(conn, cache, |db| {
        let results = if tasks.is_empty() {
            Vec::new()
        } else {
            insert(db, &tasks)?
        };
        let recorded = crate::callbacks::record(db, &callbacks)?;
        if callbacks
            .iter()
            .any(|c| matches!(&c.check, CallbackCheck::Verified(t) if t.group.is_some()))
        {
            crate::groups::place_unplaced(db)?;
        }
        Ok((results, recorded))
    })
    .await?;
    let (mut results, mut recorded) = (results.into_iter(), recorded.into_iter());
    Ok(group
        .iter()
        .map(|r| match r {
            Request::Enqueue { params, .. } => {
                Answer::Enqueued(results.by_ref().take(params.tasks.len()).collect())
            }
            Request::Callback { .. } => {
                Answer::Recorded(recorded.next().expect("one record per callback"))
            }
        })
        .collect())
}

fn insert(db: &Db<'_>, tasks: &[(&NewTask, i64)]) -> Result<Vec<EnqueueResult>, StoreError> {
    let mut inserts: [Option<Stmt<'_>>; SHAPES.len()] = Default::default();
    let mut existing = None;
    let mut redelivered: Option<Stmt<'_>> = None;
    let mut values = Vec::with_capacity(SHAPES[0] * COLS);
    let mut results = Vec::with_capacity(tasks.len());
    let places = crate::groups::place(db, tasks)?;
    let mut places = places.into_iter();
    // The groups of grouped repeats: placed rows behind them may need unparking.
    let mut repeated: Vec<(&str, &str)> = Vec::new();
    for (shape, chunk) in chunks(tasks, SHAPES) {
        let insert = match &mut inserts[shape] {
            Some(s) => s,
            slot => slot.insert(db.prepare(&INSERT_SQL[shape])?),
        };
        values.clear();
        for ((t, now), place) in chunk.iter().zip(places.by_ref()) {
            values.extend_from_slice(&row(t, *now, place));
        }
        if insert.execute(&values)? as usize == chunk.len() {
            results.extend(chunk.iter().map(|(t, _)| EnqueueResult::Created(t.id)));
            continue;
        }
        let existing = match &mut existing {
            Some(s) => s,
            slot => slot.insert(db.prepare(EXISTING)?),
        };
        // Only a chunk with a taken (kind, key) gets here: a batch of new tasks never pays
        // for redeliveries.
        for (t, now) in chunk {
            let result = existing_one(existing, t)?;
            if let (Some(g), false) = (&t.group, matches!(result, EnqueueResult::Created(_))) {
                repeated.push((t.kind.as_str(), g.as_str()));
            }
            if let (EnqueueResult::Existing(id), Some(origin)) = (&result, &t.origin) {
                let redelivered = match &mut redelivered {
                    Some(s) => s,
                    slot => slot.insert(db.prepare(REDELIVERED)?),
                };
                redelivered.execute(&[
                    id_bytes(id).into(),
                    Value::Int(*now),
                    origin.as_str().into(),
                ])?;
            }
            results.push(result);
        }
    }
    repeated.sort_unstable();
    repeated.dedup();
    crate::groups::heal(db, repeated)?;
    Ok(results)
}

/// Some (kind, key) of a chunk already existed: tells created from existing from conflicting.
pub(crate) fn existing_one(
    existing: &mut Stmt<'_>,
    t: &NewTask,
) -> Result<EnqueueResult, StoreError> {
    let mut result = None;
    existing.query(&[t.kind.as_str().into(), t.key.as_str().into()], |row| {
        let id = parse_id(row.blob(0))?;
        result = Some(if id == t.id {
            EnqueueResult::Created(id)
        } else if backstop_core::idempotency::same_payload(row.blob(1), &t.payload) {
            EnqueueResult::Existing(id)
        } else {
            EnqueueResult::Conflict(id)
        });
        Ok(())
    })?;
    result.ok_or_else(|| StoreError::Database("an enqueued task has no row".into()))
}
