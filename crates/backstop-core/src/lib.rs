//! The domain of backstop: tasks, their state machine, handler outcomes, retry policy, kind
//! configuration, a clock tests can drive, and the [`Store`] trait every backend implements;
//! and the state machines of business entities that callbacks drive ([`machine`], [`entity`]).
//!
//! Nothing here performs I/O; storage backends and the engine build on these types.

pub mod audit;
pub mod backoff;
pub mod breaker;
pub mod broker;
pub mod callback;
pub mod classify;
pub mod clock;
pub mod decide;
pub mod duration;
pub mod entity;
pub mod event;
pub mod group;
pub mod group_commit;
pub mod idempotency;
pub mod kind;
pub mod limit;
pub mod machine;
pub mod manual;
pub mod optimism;
pub mod outcome;
pub mod pause;
pub mod pointer;
pub mod requires;
pub mod schedule;
pub mod store;
pub mod task;
pub mod transition;
pub mod validate;
pub mod wire_time;

pub use backoff::RetryPolicy;
pub use callback::{
    CallbackCheck, CallbackId, CallbackRecord, CallbackVerdict, ListCallbacksParams,
    RecordCallbackParams, RecordedCallback,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use decide::{Decision, decide};
pub use entity::{Answer, Entity, EntityDecision};
pub use event::{Event, EventType};
pub use kind::{KindConfig, Target};
pub use machine::{Machine, MachineError};
pub use outcome::{AttemptOutcome, AttemptReport, Outcome};
pub use store::*;
pub use task::{Intake, NewTask, Status, Task, TaskId};
pub use transition::{InvalidTransition, Transition, transition};
