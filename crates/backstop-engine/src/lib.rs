//! The engine: claims due tasks in batches, runs them on their targets under a per-kind
//! concurrency limit, heartbeats long attempts, writes outcomes in batches, and rescues
//! expired leases so that a crash strands nothing, and prunes finished tasks by policy (both
//! on the one process elected leader). The leader's reconciler also finds overdue work and
//! explains it, audits the ledger, and beats a heartbeat every process watches; alerts go out
//! aggregated, as ledger tasks of their own. Callbacks about business entities move them
//! through configured state machines ([`Engine::transition`]), guarded by the ledger.

pub mod alerts;
mod attempt;
pub mod bridges;
mod builder;
pub mod callbacks;
pub mod checkpoint;
mod completer;
mod context;
mod dispatcher;
mod engine;
pub mod enqueue;
mod entities;
mod error;
mod executor;
mod gate;
mod guard;
mod handler;
mod heartbeat;
mod held;
mod inflight;
pub mod leader;
mod leading;
pub mod lease_token;
pub mod limit_overrides;
mod manual;
pub mod metrics;
mod options;
mod pace;
pub mod pauses;
pub mod pull;
mod pull_checkpoint;
pub mod reconciler;
mod retention;
pub mod schedules;
pub mod statement;
mod supervisor;
mod wakeups;
pub mod why;
mod worker_id;

pub use bridges::status::{AckPendingView, BridgeState, BridgeView};
pub use builder::EngineBuilder;
pub use callbacks::{CallbackError, CallbackReceipt, CallbackRequest, CallbackSource};
pub use checkpoint::CheckpointError;
pub use engine::Engine;
pub use enqueue::{EnqueueError, EnqueueRequest, Enqueued};
pub use entities::{TransitionError, TransitionRequest};
pub use error::EngineError;
pub use handler::{Handler, TaskContext, handler};
pub use limit_overrides::{KeyLimits, KeyLimitsView, KindLimitsView, LimitOverrideError};
pub use manual::ManualRequest;
pub use options::EngineOptions;
pub use pauses::{KindPauseError, KindPauseView};
pub use pull::{Completed, LeaseRequest, Leased, PullError};
pub use retention::RetentionPolicy;
pub use worker_id::worker_id;
