//! Serving connections so that no client can hold the process: a deadline for each request's
//! headers (which also closes idle keep-alive connections), and a cap on open connections, so
//! that half-sent requests cannot take every file descriptor and lock out new clients and the
//! engine's own outgoing deliveries. Request bodies have their own deadline where they are
//! read ([`crate::extract::read_body_within`]).

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// Bounds on the connections the API holds open.
#[derive(Clone, Debug)]
pub struct ConnectionLimits {
    /// Longest wait for a request's headers, counted from the connection's start or from the
    /// end of the previous response; a connection that sends none in time is closed, so this
    /// is also how long an idle keep-alive connection stays open.
    pub header_read_timeout: Duration,
    /// Most connections open at once. Past it, new connections wait in the listen backlog
    /// until one closes, and the process keeps file descriptors for everything else.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 512,
        }
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves, then stops accepting,
/// lets in-flight requests finish and returns once every connection is closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: &ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let max = limits.max_connections.clamp(1, u32::MAX as usize);
    let slots = Arc::new(Semaphore::new(max));
    let (closing, closing_rx) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        // A slot first, then a connection: at the cap, clients wait in the kernel's backlog
        // instead of taking a descriptor each.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let header_read_timeout = limits.header_read_timeout;
        let mut closing = closing_rx.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout);
            let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), service));
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection closed");
                    }
                }
                () = async { drop(closing.wait_for(|c| *c).await) } => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    drop(listener);
    let _ = closing.send(true);
    // Every open connection holds a slot: all of them back means all connections closed.
    let _ = slots.acquire_many(max as u32).await;
    Ok(())
}

/// Errors of one connection (a reset before it was accepted) are the client's; others, such
/// as running out of file descriptors, are logged and paced so the loop does not spin.
async fn accept_failed(e: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "the API cannot accept a connection");
    tokio::time::sleep(Duration::from_millis(100)).await;
}
