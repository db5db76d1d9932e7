//! Group commit for small enqueues, for stores whose batch enqueue is one statement: the calls
//! that arrive while earlier groups are being written are gathered and written as one batch,
//! and each caller is answered with its own slice of the results once that batch is durable.
//!
//! Merging changes no answer as long as the store's batch enqueue decides each task on its own,
//! in order (the first of two same `(kind, key)` wins; the second is told `Existing` or
//! `Conflict`, as it would be one call later) and stamps each task with its own creation time
//! (`created_at` is passed per task). The queue is runtime-free: the store spawns the future
//! [`GroupCommit::new`] returns, which ends when the last handle is dropped.

use crate::store::{EnqueueParams, EnqueueResult};
use crate::{NewTask, StoreError};
use futures_channel::{mpsc, oneshot};
use futures_util::StreamExt;
use jiff::Timestamp;
use std::future::Future;

/// Calls with more tasks than this are batches already and should not be queued.
pub const SMALL: usize = 16;
/// Calls gathered into one group at the most (so at most `SMALL` × this many tasks).
const GROUP_CALLS: usize = 64;
/// Groups being written at once: while they commit, the next calls gather.
const IN_FLIGHT: usize = 4;

type Reply = oneshot::Sender<Result<Vec<EnqueueResult>, StoreError>>;

/// The queue in front of a store's batch enqueue.
pub struct GroupCommit {
    tx: mpsc::UnboundedSender<(EnqueueParams, Reply)>,
}

impl GroupCommit {
    /// A queue writing each group with `write(tasks, created_at)`, whose results are in the
    /// order of `tasks`, and the future that runs it (spawn it; it ends when the queue is
    /// dropped).
    pub fn new<W, F>(write: W) -> (Self, impl Future<Output = ()> + Send + 'static)
    where
        W: Fn(Vec<NewTask>, Vec<Timestamp>) -> F + Send + Sync + 'static,
        F: Future<Output = Result<Vec<EnqueueResult>, StoreError>> + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded();
        let run = async move {
            rx.ready_chunks(GROUP_CALLS)
                .for_each_concurrent(IN_FLIGHT, |group| write_group(&write, group))
                .await;
        };
        (GroupCommit { tx }, run)
    }

    /// Enqueues `p` with the next group and waits for that group's commit.
    pub async fn submit(&self, p: EnqueueParams) -> Result<Vec<EnqueueResult>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .unbounded_send((p, reply))
            .map_err(|_| StoreError::Database("the store is closed".into()))?;
        rx.await
            .map_err(|_| StoreError::Database("the store closed before committing".into()))?
    }
}

/// Writes one group as one batch and answers each caller with its slice of the results.
async fn write_group<W, F>(write: &W, group: Vec<(EnqueueParams, Reply)>)
where
    W: Fn(Vec<NewTask>, Vec<Timestamp>) -> F,
    F: Future<Output = Result<Vec<EnqueueResult>, StoreError>>,
{
    let mut tasks = Vec::new();
    let mut created_at = Vec::new();
    let mut calls = Vec::with_capacity(group.len());
    for (p, reply) in group {
        calls.push((p.tasks.len(), reply));
        created_at.extend(std::iter::repeat_n(p.now, p.tasks.len()));
        tasks.extend(p.tasks);
    }
    match write(tasks, created_at).await {
        Ok(results) => {
            let mut results = results.into_iter();
            for (len, reply) in calls {
                let _ = reply.send(Ok(results.by_ref().take(len).collect()));
            }
        }
        Err(e) => {
            for (_, reply) in calls {
                let _ = reply.send(Err(e.replicate()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TaskId;
    use std::sync::{Arc, Mutex};

    /// One group as the writer saw it: each task's key and creation time (seconds).
    type Group = Vec<(String, i64)>;

    fn call(key: &str, secs: i64) -> EnqueueParams {
        let now = Timestamp::from_second(secs).unwrap();
        EnqueueParams {
            tasks: vec![NewTask {
                id: TaskId::new(),
                kind: "k".into(),
                key: key.into(),
                payload: b"{}".to_vec(),
                max_attempts: 3,
                run_at: now,
                expires_at: None,
                traceparent: None,
                intake: Default::default(),
                origin: None,
                group: None,
            }],
            now,
        }
    }

    /// Runs `calls` through a queue whose writer is `write`, on this thread.
    fn through<W, F>(
        write: W,
        calls: Vec<EnqueueParams>,
    ) -> Vec<Result<Vec<EnqueueResult>, StoreError>>
    where
        W: Fn(Vec<NewTask>, Vec<Timestamp>) -> F + Send + Sync + 'static,
        F: Future<Output = Result<Vec<EnqueueResult>, StoreError>> + Send + 'static,
    {
        let (queue, run) = GroupCommit::new(write);
        let answers = futures_util::future::join_all(calls.into_iter().map(|c| queue.submit(c)));
        let both = futures_util::future::select(Box::pin(answers), Box::pin(run));
        match block_on(both) {
            futures_util::future::Either::Left((answers, _)) => answers,
            futures_util::future::Either::Right(_) => panic!("the writer ended first"),
        }
    }

    /// Polls `f` to completion on this thread (everything here is ready at once).
    fn block_on<F: Future>(f: F) -> F::Output {
        use std::pin::pin;
        use std::task::{Context, Poll, Wake, Waker};
        struct Noop;
        impl Wake for Noop {
            fn wake(self: Arc<Self>) {}
        }
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let mut f = pin!(f);
        loop {
            if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
                return out;
            }
        }
    }

    #[test]
    fn queued_calls_are_written_as_one_group_and_answered_each() {
        let groups: Arc<Mutex<Vec<Group>>> = Arc::default();
        let seen = groups.clone();
        let write = move |tasks: Vec<NewTask>, at: Vec<Timestamp>| {
            seen.lock().unwrap().push(
                tasks
                    .iter()
                    .zip(&at)
                    .map(|(t, a)| (t.key.clone(), a.as_second()))
                    .collect(),
            );
            let results = tasks.iter().map(|t| EnqueueResult::Created(t.id)).collect();
            async move { Ok(results) }
        };
        let calls: Vec<_> = (0..3).map(|i| call(&format!("c{i}"), 10 + i)).collect();
        let ids: Vec<TaskId> = calls.iter().map(|c| c.tasks[0].id).collect();
        let answers = through(write, calls);
        assert_eq!(
            *groups.lock().unwrap(),
            [vec![
                ("c0".to_string(), 10),
                ("c1".into(), 11),
                ("c2".into(), 12)
            ]],
            "one group, each task with its own creation time"
        );
        for (answer, id) in answers.into_iter().zip(ids) {
            assert_eq!(answer.unwrap(), [EnqueueResult::Created(id)]);
        }
    }

    #[test]
    fn a_failed_group_fails_each_of_its_callers() {
        let write = |_: Vec<NewTask>, _: Vec<Timestamp>| async {
            Err(StoreError::Database("disk full".into()))
        };
        let answers = through(write, vec![call("a", 1), call("b", 2)]);
        assert_eq!(answers.len(), 2);
        for a in answers {
            assert!(matches!(a, Err(StoreError::Database(m)) if m.contains("disk full")));
        }
    }
}
