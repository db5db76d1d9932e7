//! Routers served on loopback for `backstop bench http`: the API under test and a no-op
//! target, which reads each request's body and answers 200. The no-op target is both the
//! raw ceiling's server and the push kind's target; it counts what it receives.

use anyhow::{Context, Result};
use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Counts the requests the no-op target received.
#[derive(Clone, Default)]
pub struct Received(Arc<AtomicUsize>);

impl Received {
    /// Requests received so far.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// The no-op target: a POST to any path reads the body, counts it and answers 200; under
/// `/push`, only after `push_delay` (a receiver's own work).
pub fn noop(received: Received, push_delay: Duration) -> Router {
    let counted = received.clone();
    Router::new()
        .route(
            "/push",
            post(move |_body: Bytes| {
                counted.0.fetch_add(1, Ordering::Relaxed);
                async move {
                    if !push_delay.is_zero() {
                        tokio::time::sleep(push_delay).await;
                    }
                }
            }),
        )
        .fallback(post(move |_body: Bytes| {
            received.0.fetch_add(1, Ordering::Relaxed);
            async {}
        }))
}

/// A router served on `127.0.0.1:0` until [`Loopback::stop`].
pub struct Loopback {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Loopback {
    /// Binds a fresh loopback port and serves `app` on it.
    pub async fn start(app: Router) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("cannot listen on loopback")?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let limits = backstop_server::ConnectionLimits::default();
        let task = tokio::spawn(async move {
            backstop_server::serve(listener, app, &limits, async {
                let _ = stopped.await;
            })
            .await
        });
        Ok(Loopback { addr, stop, task })
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops taking connections and waits for open requests to finish.
    pub async fn stop(self) -> Result<()> {
        let _ = self.stop.send(());
        Ok(self.task.await??)
    }
}
