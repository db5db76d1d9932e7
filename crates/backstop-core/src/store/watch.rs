//! The work watch: a store's hint that tasks were created elsewhere.

use super::BoxFuture;
use std::sync::Arc;

/// What a store's work watch reports (see [`WorkWatch::watch_work`]). Only hints: an engine
/// still polls, so a missed or late signal delays work by at most its poll interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkSignal {
    /// The watch is (again) connected. Signals sent while it was not were lost: look for work
    /// of every kind.
    Connected,
    /// The watch lost its connection (`error` says why); it reconnects by itself.
    Disconnected {
        /// Why.
        error: String,
    },
    /// Tasks of these kinds were created, by this process or any other (every kind when
    /// empty).
    Work {
        /// The kinds.
        kinds: Vec<String>,
    },
}

/// Receives [`WorkSignal`]s; called on the watch's own task, so it must not block.
pub type WorkSink = Arc<dyn Fn(WorkSignal) + Send + Sync>;

/// Wake-up hints for engines. A store without such a channel implements it empty.
pub trait WorkWatch: Send + Sync {
    /// Watches for tasks created by anyone (other processes, the CLI, outbox inserts) and
    /// reports them to `sink`: the future runs the watch, reconnecting by itself, until it is
    /// dropped. `None` (the default) when the store has no such channel: engines then find
    /// work by polling alone.
    fn watch_work(&self, sink: WorkSink) -> Option<BoxFuture<'static, ()>> {
        let _ = sink;
        None
    }
}
