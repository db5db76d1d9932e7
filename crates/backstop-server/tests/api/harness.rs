//! A live API on loopback over a real SQLite ledger, and a small JSON client for it.

use backstop_core::store::CountsParams;
use backstop_core::{
    Clock, KindConfig, Machine, ManualClock, RetryPolicy, Store, SystemClock, Target,
};
use backstop_engine::{Engine, EngineOptions};
use backstop_server::{ApiToken, AppState, ConnectionLimits, Limits};
use backstop_store_sqlite::SqliteStore;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What the API under test is configured with.
pub struct Setup {
    pub kinds: Vec<KindConfig>,
    /// State machines of guarded transitions.
    pub machines: Vec<Machine>,
    pub limits: Limits,
    pub tokens: Vec<ApiToken>,
    pub max_payload: usize,
    /// Drive time by hand (lease expiry, retry timing).
    pub manual_clock: bool,
    /// Header deadline and connection cap.
    pub connections: ConnectionLimits,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            kinds: vec![pull("report.render"), push("sms.send")],
            machines: vec![order()],
            limits: Limits::default(),
            tokens: Vec::new(),
            max_payload: 64 * 1024,
            manual_clock: false,
            connections: ConnectionLimits::default(),
        }
    }
}

/// The order machine of the guarded transitions' issue.
pub fn order() -> Machine {
    Machine::new(
        "order",
        "pending",
        [
            ("pending", vec!["paid", "closed"]),
            ("paid", vec!["refunding", "refunded"]),
            ("refunding", vec!["refunded"]),
        ],
    )
    .unwrap()
}

/// A pull kind with fast retries.
pub fn pull(name: &str) -> KindConfig {
    let mut k = KindConfig::new(name, Target::Pull);
    k.max_attempts = 3;
    k.retry = RetryPolicy::Schedule(vec![Duration::from_secs(1)]);
    k
}

/// A push kind whose target never answers (nothing listens on port 9 of loopback); its tasks
/// are only enqueued in these tests, never delivered in time to matter.
pub fn push(name: &str) -> KindConfig {
    let mut k = KindConfig::new(
        name,
        Target::HttpPush {
            url: "http://127.0.0.1:9/none".into(),
            secret: None,
        },
    );
    k.max_attempts = 1;
    k
}

pub struct Api {
    pub base: String,
    pub client: reqwest::Client,
    pub store: Arc<dyn Store>,
    /// The same store, for what only SQLite has (its page limit, to fill the disk).
    pub sqlite: SqliteStore,
    pub clock: Option<Arc<ManualClock>>,
    /// Sent with every request when set.
    pub token: Option<String>,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Api {
    pub async fn start(s: Setup) -> Api {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteStore::open(&dir.path().join("api.db").display().to_string())
            .await
            .unwrap();
        let store: Arc<dyn Store> = Arc::new(sqlite.clone());
        let manual = s
            .manual_clock
            .then(|| Arc::new(ManualClock::new(jiff::Timestamp::now())));
        let clock: Arc<dyn Clock> = match &manual {
            Some(m) => m.clone(),
            None => Arc::new(SystemClock),
        };
        let metrics = backstop_server::install_recorder();
        let mut b = Engine::builder(store.clone())
            .clock(clock)
            .options(EngineOptions {
                poll_interval: Duration::from_millis(50),
                rescue_interval: Duration::from_millis(50),
                grace: Duration::from_millis(200),
                max_payload: s.max_payload,
                ..Default::default()
            });
        for k in s.kinds {
            b = b.kind(k);
        }
        for m in s.machines {
            b = b.machine(m);
        }
        let engine = b.build().unwrap();
        let (stop, stop_rx) = watch::channel(false);
        let state = AppState::new(
            engine.clone(),
            s.limits,
            s.tokens,
            stop_rx.clone(),
            Some(metrics),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = backstop_server::app(state);
        let mut rx1 = stop_rx.clone();
        let mut rx2 = stop_rx;
        let e = engine.clone();
        let connections = s.connections;
        let server = tokio::spawn(async move {
            let serving = backstop_server::serve(listener, app, &connections, async move {
                let _ = rx1.wait_for(|s| *s).await;
            });
            let running = e.run(async move {
                let _ = rx2.wait_for(|s| *s).await;
            });
            let (r, ()) = tokio::join!(serving, running);
            r.unwrap();
        });
        Api {
            base,
            client: reqwest::Client::new(),
            store,
            sqlite,
            clock: manual,
            token: None,
            stop,
            server,
            _dir: dir,
        }
    }

    /// Stops the server and the engine, and waits for both.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        tokio::time::timeout(Duration::from_secs(10), self.server)
            .await
            .expect("the server stops promptly")
            .unwrap();
    }

    fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// Sends raw bytes; returns the status, the content type and the body text.
    pub async fn raw(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> (u16, String, String) {
        let mut r = self.req(method, path).body(body);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let ctype = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        (status, ctype, resp.text().await.unwrap())
    }

    /// POSTs JSON; returns the status and the JSON answer. Every error must be a problem
    /// document with a detail.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.post_with(path, body, &[]).await
    }

    pub async fn post_with(
        &self,
        path: &str,
        body: Value,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let mut h = vec![("content-type", "application/json")];
        h.extend_from_slice(headers);
        let (status, ctype, text) = self
            .raw(
                reqwest::Method::POST,
                path,
                serde_json::to_vec(&body).unwrap(),
                &h,
            )
            .await;
        decode(status, &ctype, &text)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let (status, ctype, text) = self.raw(reqwest::Method::GET, path, Vec::new(), &[]).await;
        decode(status, &ctype, &text)
    }

    /// How many tasks the ledger holds, of all kinds.
    pub async fn task_count(&self) -> u64 {
        self.store
            .counts(CountsParams::default())
            .await
            .unwrap()
            .total()
    }
}

/// Parses an answer, checking the error contract on the way.
pub fn decode(status: u16, ctype: &str, text: &str) -> (u16, Value) {
    let v: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("status {status}: body is not JSON ({e}): {text}"));
    if status >= 400 {
        assert_eq!(ctype, "application/problem+json", "{status}: {text}");
        assert_eq!(v["status"], status, "{text}");
        assert!(
            v["detail"].as_str().is_some_and(|d| d.len() > 10),
            "a useful detail: {text}"
        );
    }
    (status, v)
}

/// A JSON object for an enqueue.
pub fn task(kind: &str, key: &str, payload: Value) -> Value {
    serde_json::json!({"kind": kind, "key": key, "payload": payload})
}
