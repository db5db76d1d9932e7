//! Enqueue with group commit: concurrent callers' tasks are written in one `BEGIN IMMEDIATE`
//! transaction and each caller is answered only after that commit is durable.

use crate::Inner;
use crate::raw::{self, Db, Stmt, Value};
use crate::row::jiff_ms::to_ms;
use crate::row::{id_bytes, parse_id};
use crate::shapes::chunks;
use backstop_core::store::{EnqueueParams, EnqueueResult};
use backstop_core::{NewTask, StoreError};
use sqlx::SqliteConnection;
use std::sync::{LazyLock, Weak};
use tokio::sync::{mpsc, oneshot};

/// Tasks per group-commit transaction; one large request is never split across commits.
const GROUP_LIMIT: usize = 4000;

struct Request {
    params: EnqueueParams,
    reply: oneshot::Sender<Result<Vec<EnqueueResult>, StoreError>>,
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
        self.tx
            .send(Request { params, reply })
            .map_err(|_| StoreError::Database("the store is closed".into()))?;
        rx.await
            .map_err(|_| StoreError::Database("the store closed before committing".into()))?
    }
}

async fn run(inner: Weak<Inner>, mut rx: mpsc::UnboundedReceiver<Request>) {
    while let Some(first) = rx.recv().await {
        let mut group = vec![first];
        let mut size = group[0].params.tasks.len();
        while size < GROUP_LIMIT {
            match rx.try_recv() {
                Ok(r) => {
                    size += r.params.tasks.len();
                    group.push(r);
                }
                Err(_) => break,
            }
        }
        let Some(inner) = inner.upgrade() else { break };
        let result = {
            let mut w = inner.writer.lock().await;
            insert_group(&mut w, &group).await
        };
        match result {
            Ok(per_request) => {
                for (req, res) in group.into_iter().zip(per_request) {
                    let _ = req.reply.send(Ok(res));
                }
            }
            Err(e) => {
                let msg = e.to_string();
                for req in group {
                    let _ = req.reply.send(Err(StoreError::Database(msg.clone())));
                }
            }
        }
    }
}

/// Rows per INSERT, largest first. Rows of one statement share SQLite's open cursors, so the
/// appends to the table and to the time-ordered indexes skip the descent from the root that a
/// one-row statement pays; past 32 rows, preparing the statement costs more than that saves.
const SHAPES: &[usize] = &[32, 8, 2, 1];
const COLS: usize = 9;

/// One INSERT per shape; each row binds (id, kind, key, payload, max_attempts, run_at,
/// expires_at, traceparent, now).
static INSERT_SQL: LazyLock<Vec<String>> = LazyLock::new(|| {
    SHAPES
        .iter()
        .map(|rows| {
            let values = (0..*rows)
                .map(|r| {
                    let p: Vec<String> = (1..=COLS).map(|c| format!("?{}", r * COLS + c)).collect();
                    // created_at and updated_at are both `now`.
                    format!("({}, {})", p.join(", "), p[COLS - 1])
                })
                .collect::<Vec<_>>()
                .join(", ");
            // OR FAIL: no statement journal; an error rolls the whole transaction back anyway.
            format!(
                "INSERT OR FAIL INTO backstop_tasks (id, kind, key, payload, max_attempts, run_at, \
                 expires_at, traceparent, created_at, updated_at) VALUES {values} \
                 ON CONFLICT (kind, key) DO NOTHING"
            )
        })
        .collect()
});

pub(crate) const EXISTING: &str =
    "SELECT id, payload FROM backstop_tasks WHERE kind = ?1 AND key = ?2";

async fn insert_group(
    conn: &mut SqliteConnection,
    group: &[Request],
) -> Result<Vec<Vec<EnqueueResult>>, StoreError> {
    // The whole group is cut into shapes together, whatever each request holds.
    let tasks: Vec<(&NewTask, i64)> = group
        .iter()
        .flat_map(|r| {
            let now = to_ms(r.params.now);
            r.params.tasks.iter().map(move |t| (t, now))
        })
        .collect();
    let mut results = raw::write(conn, |db| insert(db, &tasks)).await?.into_iter();
    Ok(group
        .iter()
        .map(|r| results.by_ref().take(r.params.tasks.len()).collect())
        .collect())
}

fn insert(db: &Db<'_>, tasks: &[(&NewTask, i64)]) -> Result<Vec<EnqueueResult>, StoreError> {
    let mut inserts: [Option<Stmt<'_>>; SHAPES.len()] = Default::default();
    let mut existing = None;
    let mut values = Vec::with_capacity(SHAPES[0] * COLS);
    let mut results = Vec::with_capacity(tasks.len());
    for (shape, chunk) in chunks(tasks, SHAPES) {
        let insert = match &mut inserts[shape] {
            Some(s) => s,
            slot => slot.insert(db.prepare(&INSERT_SQL[shape])?),
        };
        values.clear();
        for (t, now) in chunk {
            values.extend_from_slice(&[
                id_bytes(&t.id).into(),
                t.kind.as_str().into(),
                t.key.as_str().into(),
                t.payload.as_slice().into(),
                i64::from(t.max_attempts).into(),
                to_ms(t.run_at).into(),
                t.expires_at.map(to_ms).into(),
                t.traceparent.as_deref().into(),
                Value::Int(*now),
            ]);
        }
        if insert.execute(&values)? as usize == chunk.len() {
            results.extend(chunk.iter().map(|(t, _)| EnqueueResult::Created(t.id)));
            continue;
        }
        let existing = match &mut existing {
            Some(s) => s,
            slot => slot.insert(db.prepare(EXISTING)?),
        };
        for (t, _) in chunk {
            results.push(existing_one(existing, t)?);
        }
    }
    Ok(results)
}

/// Some (kind, key) of a chunk already existed: tells created from existing from conflicting.
fn existing_one(existing: &mut Stmt<'_>, t: &NewTask) -> Result<EnqueueResult, StoreError> {
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
