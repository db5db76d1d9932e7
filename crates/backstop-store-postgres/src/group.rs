//! Group commit for small enqueues: concurrent callers' tasks go to PostgreSQL as one batch
//! statement, and each caller is answered with its own results once that statement has
//! committed.
//!
//! A batch is one `INSERT … FROM UNNEST` and so one transaction and one WAL flush, where
//! separate one-task calls each pay a round trip, a commit and a flush. Merging changes no
//! answer: the batch enqueue already decides each task on its own, in order (the first of two
//! same `(kind, key)` wins and the second is told `Existing` or `Conflict`, as it would be one
//! call later), and each task keeps its own `created_at`. Large calls are already batches and
//! go straight through.

use crate::Db;
use crate::enqueue;
use backstop_core::StoreError;
use backstop_core::store::{EnqueueParams, EnqueueResult};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Calls with more tasks than this are written on their own.
pub(crate) const SMALL: usize = 16;
/// Tasks per group statement.
const GROUP_LIMIT: usize = 1000;
/// Groups written at once: while some commit, the next ones gather.
const IN_FLIGHT: usize = 4;

type Reply = oneshot::Sender<Result<Vec<EnqueueResult>, StoreError>>;

/// The queue in front of the batch enqueue.
pub(crate) struct Committer {
    tx: mpsc::UnboundedSender<(EnqueueParams, Reply)>,
}

impl Committer {
    /// Starts the group writer; it ends when the last handle to this committer is dropped.
    pub(crate) fn start(db: Arc<Db>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(db, rx));
        Committer { tx }
    }

    /// Enqueues `p` in the next group and waits for that group's commit.
    pub(crate) async fn submit(&self, p: EnqueueParams) -> Result<Vec<EnqueueResult>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send((p, reply))
            .map_err(|_| StoreError::Database("the store is closed".into()))?;
        rx.await
            .map_err(|_| StoreError::Database("the store closed before committing".into()))?
    }
}

async fn run(db: Arc<Db>, mut rx: mpsc::UnboundedReceiver<(EnqueueParams, Reply)>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    while let Some(first) = rx.recv().await {
        // Wait for a free slot first: the calls that arrive meanwhile join this group.
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let mut size = first.0.tasks.len();
        let mut group = vec![first];
        while size < GROUP_LIMIT {
            match rx.try_recv() {
                Ok(call) => {
                    size += call.0.tasks.len();
                    group.push(call);
                }
                Err(_) => break,
            }
        }
        let db = db.clone();
        tokio::spawn(async move {
            write(&db, group).await;
            drop(permit);
        });
    }
}

/// Writes one group as one batch and answers each caller with its slice of the results.
async fn write(db: &Db, group: Vec<(EnqueueParams, Reply)>) {
    let mut tasks = Vec::new();
    let mut created_at = Vec::new();
    let mut lens = Vec::with_capacity(group.len());
    let mut replies = Vec::with_capacity(group.len());
    for (p, reply) in group {
        lens.push(p.tasks.len());
        created_at.extend(std::iter::repeat_n(p.now, p.tasks.len()));
        tasks.extend(p.tasks);
        replies.push(reply);
    }
    match enqueue::enqueue_rows(db, &tasks, &created_at).await {
        Ok(results) => {
            let mut results = results.into_iter();
            for (reply, len) in replies.into_iter().zip(lens) {
                let _ = reply.send(Ok(results.by_ref().take(len).collect()));
            }
        }
        Err(e) => {
            let msg = e.to_string();
            for reply in replies {
                let _ = reply.send(Err(StoreError::Database(msg.clone())));
            }
        }
    }
}
