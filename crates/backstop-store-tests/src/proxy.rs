//! A TCP proxy on loopback that a test can close: the database server "goes away" for one
//! store while the machine's shared server keeps running for everyone else.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Forwards each connection on its loopback port to `upstream` until stopped.
pub struct Proxy {
    /// Where it listens.
    pub addr: SocketAddr,
    accept: JoinHandle<()>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    /// Listens on `on` (`127.0.0.1:0` for any port, or the address of a stopped proxy to
    /// bring it back) and forwards to `upstream` (`host:port`).
    pub async fn start(on: &str, upstream: &str) -> Proxy {
        let listener = TcpListener::bind(on).await.expect("proxy port");
        let addr = listener.local_addr().expect("proxy address");
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let held = links.clone();
        let upstream = upstream.to_string();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut out) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                });
                held.lock().expect("not poisoned").push(link);
            }
        });
        Proxy {
            addr,
            accept,
            links,
        }
    }

    /// Closes the port (new connections are refused) and every connection through it.
    pub async fn stop(self) {
        self.accept.abort();
        let _ = self.accept.await;
        for link in self.links.lock().expect("not poisoned").drain(..) {
            link.abort();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
