//! What every handler shares: the engine, the limits, the tokens, the shutdown signal.

use crate::auth::ApiToken;
use backstop_engine::Engine;
use metrics_exporter_prometheus::PrometheusHandle;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Bounds on what one request may ask for. Over a bound is a 413 or 422, never a hang.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest request body, in bytes (a batch of enqueues is one body).
    pub max_body: usize,
    /// Most enqueues in one batch.
    pub max_batch: usize,
    /// Most tasks one lease request may take.
    pub max_lease_tasks: usize,
    /// Longest lease one request may take.
    pub max_lease: Duration,
    /// Longest long-poll wait.
    pub max_wait: Duration,
    /// Most tasks one listing returns.
    pub max_list: usize,
    /// Longest wait for a request's whole body once its headers arrived (a client that
    /// announces more than it sends gets a 408, not a connection held forever).
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body: 16 * 1024 * 1024,
            max_batch: 1000,
            max_lease_tasks: 1000,
            max_lease: Duration::from_secs(3600),
            max_wait: Duration::from_secs(30),
            max_list: 1000,
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// The shared state of the API.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    engine: Engine,
    limits: Limits,
    tokens: Vec<ApiToken>,
    stop: watch::Receiver<bool>,
    metrics: Option<PrometheusHandle>,
}

impl AppState {
    /// State for an API over `engine`. `stop` turns true when the server shuts down, so long
    /// polls answer at once instead of holding the shutdown up.
    pub fn new(
        engine: Engine,
        limits: Limits,
        tokens: Vec<ApiToken>,
        stop: watch::Receiver<bool>,
        metrics: Option<PrometheusHandle>,
    ) -> Self {
        AppState(Arc::new(Inner {
            engine,
            limits,
            tokens,
            stop,
            metrics,
        }))
    }

    pub fn engine(&self) -> &Engine {
        &self.0.engine
    }

    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    pub fn tokens(&self) -> &[ApiToken] {
        &self.0.tokens
    }

    pub fn metrics(&self) -> Option<&PrometheusHandle> {
        self.0.metrics.as_ref()
    }

    /// Resolves when the server is shutting down.
    pub async fn stopping(&self) {
        let mut rx = self.0.stop.clone();
        let _ = rx.wait_for(|s| *s).await;
    }
}
