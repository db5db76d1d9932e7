//! What the NATS tests share: the server from `BACKSTOP_TEST_NATS_URL`, streams of their own
//! per test (deleted when the guard goes, even after a failed assertion), bridge configs and
//! a plain JetStream context to set up and look at what the clients left behind.

#![allow(dead_code)] // Each test file uses its own part.

use async_nats::jetstream::{self, stream};
use backstop_brokers::{Consumer, Received};
use backstop_core::broker::{BridgeConfig, BridgeSource, BrokerUrl, KeySource, NatsConsumer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The test server's URL, or `None` after saying `skipped:` on stderr.
pub fn url() -> Option<String> {
    match std::env::var("BACKSTOP_TEST_NATS_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            eprintln!("skipped: BACKSTOP_TEST_NATS_URL is not set");
            None
        }
    }
}

/// A plain JetStream context of the test's own.
pub async fn js(url: &str) -> jetstream::Context {
    jetstream::new(async_nats::connect(url).await.unwrap())
}

/// Stream names and subjects no other test (or run) uses; the streams are deleted on drop.
pub struct Names {
    url: String,
    streams: Vec<String>,
}

impl Names {
    pub fn new(url: &str) -> Self {
        Names {
            url: url.to_string(),
            streams: Vec::new(),
        }
    }

    /// A fresh token (letters, digits, `_`: valid in stream, consumer and subject names).
    pub fn unique(what: &str) -> String {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let n = N.fetch_add(1, Ordering::Relaxed);
        format!("bt_{}_{nanos}_{n}_{what}", std::process::id())
    }

    /// A stream named fresh, taking `<its name>.>`, created now; returns its name and subject
    /// prefix.
    pub async fn stream(&mut self, js: &jetstream::Context) -> (String, String) {
        let name = Self::unique("stream");
        let subjects = format!("{name}.>");
        js.create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![subjects],
            ..Default::default()
        })
        .await
        .unwrap();
        self.streams.push(name.clone());
        (name.clone(), name)
    }

    /// A stream that a test creates by other means, deleted with the others.
    pub fn own(&mut self, stream: &str) {
        self.streams.push(stream.to_string());
    }
}

impl Drop for Names {
    fn drop(&mut self) {
        let url = self.url.clone();
        let streams = std::mem::take(&mut self.streams);
        // A runtime of its own on a thread of its own: a test's own runtime may be the one
        // being dropped.
        let deleted = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let js = js(&url).await;
                for s in &streams {
                    if let Err(e) = js.delete_stream(s).await {
                        eprintln!("could not delete test stream {s:?}: {e}");
                    }
                }
            })
        })
        .join();
        if deleted.is_err() {
            eprintln!("could not delete test streams");
        }
    }
}

/// The consumer a bridge creates when missing, with a short AckWait unless said otherwise.
pub fn nats_consumer(stream: &str, consumer: &str, subject: Option<String>) -> NatsConsumer {
    NatsConsumer {
        stream: stream.into(),
        consumer: consumer.into(),
        subject,
        ack_wait: Duration::from_secs(30),
        max_deliver: 5,
        max_ack_pending: 100,
    }
}

/// A bridge of a JetStream consumer.
pub fn bridge(url: &str, c: NatsConsumer) -> BridgeConfig {
    BridgeConfig {
        name: "test".into(),
        broker: BrokerUrl::new(url),
        source: BridgeSource::NatsStream(c),
        kind: "test.kind".into(),
        key: KeySource::MessageId,
        prefetch: 64,
        dead_letters: false,
        max_message: 1 << 20,
    }
}

/// The next batch that holds something (a pull that expires gives an empty one), failing
/// the test after 10 s instead of hanging.
pub async fn batch(c: &mut Box<dyn Consumer>, max: usize) -> Vec<Received> {
    let taken = async {
        loop {
            let b = c.next_batch(max).await.expect("a batch");
            if !b.is_empty() {
                return b;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), taken)
        .await
        .expect("a batch within 10 s")
}

/// Batches until `n` messages have come.
pub async fn receive(c: &mut Box<dyn Consumer>, n: usize) -> Vec<Received> {
    let mut all = Vec::new();
    while all.len() < n {
        all.extend(batch(c, n - all.len()).await);
    }
    all
}

/// Asserts that no batch comes within `wait`.
pub async fn nothing_within(c: &mut Box<dyn Consumer>, wait: Duration) {
    let taken = async {
        loop {
            let b = c.next_batch(10).await.expect("no error");
            if !b.is_empty() {
                return b;
            }
        }
    };
    if let Ok(got) = tokio::time::timeout(wait, taken).await {
        let bodies: Vec<String> = got
            .iter()
            .map(|m| String::from_utf8_lossy(&m.body).into_owned())
            .collect();
        panic!("expected nothing, got {bodies:?}");
    }
}

/// Publishes `body` to `subject` with `headers`, waiting for the PubAck.
pub async fn publish(js: &jetstream::Context, subject: &str, headers: &[(&str, &str)], body: &str) {
    let mut h = async_nats::HeaderMap::new();
    for (k, v) in headers {
        h.insert(*k, *v);
    }
    js.publish_with_headers(subject.to_string(), h, body.to_string().into())
        .await
        .unwrap()
        .await
        .unwrap();
}

/// A TCP proxy to the test server whose connections can be cut, as a network failure or a
/// server restart would, without touching the server other tests share.
pub struct Proxy {
    /// `nats://` of the proxy.
    pub url: String,
    conns: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    refusing: std::sync::Arc<std::sync::atomic::AtomicBool>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(server: &str) -> Proxy {
        let upstream = server.trim_start_matches("nats://").to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("nats://{}", listener.local_addr().unwrap());
        let conns = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let held = conns.clone();
        let refusing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let refuse = refusing.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if refuse.load(Ordering::Relaxed) {
                    continue; // dropped: closed at once, as a server that is down
                }
                let upstream = upstream.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await {
                        tokio::io::copy_bidirectional(&mut client, &mut server)
                            .await
                            .ok();
                    }
                });
                held.lock().unwrap().push(task);
            }
        });
        Proxy {
            url,
            conns,
            refusing,
            accept,
        }
    }

    /// While `true`, every new connection is closed at once.
    pub fn refuse(&self, refusing: bool) {
        self.refusing.store(refusing, Ordering::Relaxed);
    }

    /// Closes every connection through the proxy; new ones are still let through.
    pub fn cut(&self) {
        for task in self.conns.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}
