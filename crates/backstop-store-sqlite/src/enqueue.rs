//! Enqueue with group commit: concurrent callers' tasks are written in one `BEGIN IMMEDIATE`
//! transaction and each caller is answered only after that commit is durable.

use crate::row::jiff_ms::to_ms;
use crate::row::parse_id;
use crate::{Inner, db_err};
use backstop_core::store::{EnqueueParams, EnqueueResult};
use backstop_core::{NewTask, StoreError};
use sqlx::{Connection, QueryBuilder, Row, Sqlite, SqliteConnection};
use std::sync::Weak;
use tokio::sync::{mpsc, oneshot};

/// Tasks per INSERT statement: 10 bound values each stays far below SQLite's variable limit.
const ROWS_PER_STATEMENT: usize = 500;
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

async fn insert_group(
    conn: &mut SqliteConnection,
    group: &[Request],
) -> Result<Vec<Vec<EnqueueResult>>, StoreError> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let mut out = Vec::with_capacity(group.len());
    for req in group {
        let mut results = Vec::with_capacity(req.params.tasks.len());
        for chunk in req.params.tasks.chunks(ROWS_PER_STATEMENT) {
            results.extend(insert_chunk(&mut tx, chunk, to_ms(req.params.now)).await?);
        }
        out.push(results);
    }
    tx.commit().await.map_err(db_err)?;
    Ok(out)
}

async fn insert_chunk(
    conn: &mut SqliteConnection,
    tasks: &[NewTask],
    now: i64,
) -> Result<Vec<EnqueueResult>, StoreError> {
    let mut qb: QueryBuilder<Sqlite> = QueryBuilder::new(
        "INSERT INTO backstop_tasks (id, kind, key, payload, max_attempts, run_at, expires_at, \
         traceparent, created_at, updated_at) ",
    );
    qb.push_values(tasks, |mut b, t| {
        b.push_bind(t.id.to_string())
            .push_bind(&t.kind)
            .push_bind(&t.key)
            .push_bind(&t.payload)
            .push_bind(t.max_attempts as i64)
            .push_bind(to_ms(t.run_at))
            .push_bind(t.expires_at.map(to_ms))
            .push_bind(&t.traceparent)
            .push_bind(now)
            .push_bind(now);
    });
    qb.push(" ON CONFLICT (kind, key) DO NOTHING");
    let inserted = qb
        .build()
        .execute(&mut *conn)
        .await
        .map_err(db_err)?
        .rows_affected();
    if inserted as usize == tasks.len() {
        return Ok(tasks.iter().map(|t| EnqueueResult::Created(t.id)).collect());
    }
    // Some (kind, key) already existed: tell created from existing from conflicting.
    let mut results = Vec::with_capacity(tasks.len());
    for t in tasks {
        let row = sqlx::query("SELECT id, payload FROM backstop_tasks WHERE kind = ? AND key = ?")
            .bind(&t.kind)
            .bind(&t.key)
            .fetch_one(&mut *conn)
            .await
            .map_err(db_err)?;
        let id = parse_id(row.get("id"))?;
        let payload: Vec<u8> = row.get("payload");
        results.push(if id == t.id {
            EnqueueResult::Created(id)
        } else if same_payload(&payload, &t.payload) {
            EnqueueResult::Existing(id)
        } else {
            EnqueueResult::Conflict(id)
        });
    }
    Ok(results)
}

/// Byte-identical, or the same JSON value written differently (key order, spacing).
fn same_payload(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    match (
        serde_json::from_slice::<serde_json::Value>(a),
        serde_json::from_slice::<serde_json::Value>(b),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}
