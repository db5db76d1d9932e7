//! The tasks one dispatcher leased ahead of its free slots and holds until a slot takes them.
//!
//! A finishing attempt takes the next held task for its own slot, so that the task's start is
//! written in the same transaction as the outcome that freed the slot (see `completer`); the
//! dispatcher tops the queue up with claims, starts held tasks in slots that are free, and
//! closes the queue at shutdown, after which nothing more is taken from it.

use backstop_core::store::ClaimedTask;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Notify;

/// The held tasks of one kind, oldest first.
#[derive(Default)]
pub(crate) struct Held {
    queue: Mutex<Queue>,
    /// Signalled when an attempt takes a task: the dispatcher may claim more.
    taken: Notify,
    /// Attempts started through hand-offs since the dispatcher last looked (for its pace).
    started: AtomicUsize,
}

#[derive(Default)]
struct Queue {
    tasks: VecDeque<ClaimedTask>,
    closed: bool,
}

impl Held {
    /// How many tasks are held.
    pub(crate) fn len(&self) -> usize {
        self.lock().tasks.len()
    }

    /// Adds claimed tasks that wait for a slot.
    pub(crate) fn push(&self, t: ClaimedTask) {
        self.lock().tasks.push_back(t);
    }

    /// Takes the oldest held task for a slot that is free; `None` when none is held or the
    /// queue is closed.
    pub(crate) fn take(&self) -> Option<ClaimedTask> {
        let t = {
            let mut q = self.lock();
            if q.closed {
                return None;
            }
            q.tasks.pop_front()
        };
        if t.is_some() {
            self.taken.notify_one();
        }
        t
    }

    /// Counts attempts started by a hand-off.
    pub(crate) fn started(&self, n: usize) {
        self.started.fetch_add(n, Ordering::Relaxed);
    }

    /// The attempts started by hand-offs since the last call.
    pub(crate) fn started_since(&self) -> usize {
        self.started.swap(0, Ordering::Relaxed)
    }

    /// Resolves once a task has been taken since the last time this resolved.
    pub(crate) async fn taken(&self) {
        self.taken.notified().await
    }

    /// Takes every held task, leaving the queue open (the kind was paused: they go back).
    pub(crate) fn drain(&self) -> Vec<ClaimedTask> {
        self.lock().tasks.drain(..).collect()
    }

    /// Closes the queue (nothing more is taken) and returns what it held.
    pub(crate) fn close(&self) -> Vec<ClaimedTask> {
        let mut q = self.lock();
        q.closed = true;
        q.tasks.drain(..).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}
