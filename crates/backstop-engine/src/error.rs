//! Why an engine could not be built.

/// Why the engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("kind {0:?} has an in-process target but no handler is registered for it")]
    MissingHandler(String),
    #[error("a handler is registered for {0:?}, which is not a configured kind")]
    HandlerWithoutKind(String),
    #[error("kind {kind:?}: bad signing secret: {error}")]
    BadSecret { kind: String, error: String },
    #[error("kind {kind:?}: bad target URL {error}")]
    BadUrl { kind: String, error: String },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    #[error("kind {0:?} is configured twice")]
    DuplicateKind(String),
    #[error("machine {0:?} is configured twice")]
    DuplicateMachine(String),
    #[error(
        "inbound source {source_name:?} creates tasks of kind {kind:?}, which is not a configured kind"
    )]
    SourceKind { source_name: String, kind: String },
    #[error("inbound source {0:?} is configured twice")]
    DuplicateSource(String),
    #[error("bridge {bridge:?} puts messages in kind {kind:?}, which is not configured")]
    BridgeKind { bridge: String, kind: String },
    #[error("bridge {0:?} is configured twice")]
    DuplicateBridge(String),
    #[error("schedule {schedule:?} creates tasks of kind {kind:?}, which is not configured")]
    ScheduleKind { schedule: String, kind: String },
    #[error("schedule {0:?} is configured twice")]
    DuplicateSchedule(String),
    #[error("kind {kind:?}: requires: {error}")]
    Requires { kind: String, error: String },
}
