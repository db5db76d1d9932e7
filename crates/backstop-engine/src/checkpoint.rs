//! Checkpoints of long attempts: what an in-process handler's context uses to save its cursor
//! and to learn that the worker is stopping, and the bound every cursor is held to (the pull
//! API's checkpoints too).

use backstop_core::store::{CheckpointParams, Checkpointed, Checkpoints, LeaseRef};
use backstop_core::{Clock, StoreError};
use std::fmt;
use std::sync::Arc;
use tokio::sync::watch;

/// Largest cursor kept, in bytes of JSON: a cursor says where to resume, not what was done.
pub const MAX_CURSOR_BYTES: usize = 64 * 1024;

/// Why a checkpoint was not saved.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The lease was lost (it expired and the task was claimed again, or it ended): stop
    /// working on the task. The rejection is on the task's timeline.
    #[error("the lease was lost: the checkpoint was not saved; stop working on this task")]
    LeaseLost,
    /// The cursor is larger than [`MAX_CURSOR_BYTES`].
    #[error("the cursor is {len} bytes of JSON, over the {MAX_CURSOR_BYTES}-byte limit")]
    TooLarge {
        /// Its size.
        len: usize,
    },
    /// The cursor is not JSON.
    #[error("the cursor must be JSON: {source}")]
    NotJson {
        /// What the serializer said.
        #[source]
        source: serde_json::Error,
    },
    /// This context was not given by a running attempt (built by hand, as in a unit test).
    #[error("this task context belongs to no running attempt: nothing to checkpoint")]
    Detached,
    /// The ledger could not be written.
    #[error("the checkpoint could not be written: {source}")]
    Store {
        /// The store's error.
        #[from]
        source: StoreError,
    },
}

/// Checks a cursor's size.
pub fn check_cursor(json: &str) -> Result<(), CheckpointError> {
    if json.len() > MAX_CURSOR_BYTES {
        return Err(CheckpointError::TooLarge { len: json.len() });
    }
    Ok(())
}

/// One running attempt's handle on its lease, for its handler: save a cursor under the
/// lease, and see the worker stopping.
pub(crate) struct AttemptControl {
    pub(crate) store: Arc<dyn Checkpoints>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) lease: LeaseRef,
    pub(crate) attempt: u32,
    pub(crate) worker: Arc<str>,
    pub(crate) stopping: watch::Receiver<bool>,
}

impl fmt::Debug for AttemptControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttemptControl")
            .field("lease", &self.lease)
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}

impl AttemptControl {
    /// Saves `cursor` (JSON text), fenced by the lease.
    pub(crate) async fn save(&self, cursor: String) -> Result<(), CheckpointError> {
        check_cursor(&cursor)?;
        let r = self
            .store
            .checkpoint(CheckpointParams {
                lease: self.lease,
                attempt: self.attempt,
                worker: self.worker.to_string(),
                cursor,
                now: self.clock.now(),
            })
            .await?;
        match r {
            Checkpointed::Saved => Ok(()),
            Checkpointed::Rejected => Err(CheckpointError::LeaseLost),
        }
    }

    /// Whether the worker is shutting down.
    pub(crate) fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Resolves once the worker is shutting down (at once if it is).
    pub(crate) async fn stopping(&self) {
        let mut rx = self.stopping.clone();
        // A closed channel means the engine is gone: as good as stopping.
        let _ = rx.wait_for(|s| *s).await;
    }
}
