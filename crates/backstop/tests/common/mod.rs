//! Shared pieces of the binary's end-to-end tests: a real HTTP target on loopback that
//! records every delivery, and helpers to run the `backstop` binary.

#![allow(dead_code)]

pub mod db;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The Standard Webhooks secret the tests configure (SW-1 of the shared vectors).
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One delivery as the target saw it.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub status: u16,
}

impl Delivery {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or("")
    }
}

/// Decides the response to the n-th delivery (from 1) of one task on one path.
pub type Script =
    Arc<dyn Fn(&str, usize) -> (u16, Option<Duration>, Vec<(&'static str, String)>) + Send + Sync>;

/// Every delivery so far, and how many each (path, webhook-id) has had.
#[derive(Default)]
struct Log {
    deliveries: Vec<Delivery>,
    per_task: HashMap<(String, String), usize>,
}

#[derive(Clone)]
struct Target {
    log: Arc<Mutex<Log>>,
    script: Script,
}

/// A recording HTTP target on 127.0.0.1.
pub struct TestTarget {
    pub base: String,
    log: Arc<Mutex<Log>>,
}

impl TestTarget {
    pub async fn start(script: Script) -> TestTarget {
        let log = Arc::new(Mutex::new(Log::default()));
        let state = Target {
            log: log.clone(),
            script,
        };
        let app = Router::new().fallback(handle).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        TestTarget {
            base: format!("http://{addr}"),
            log,
        }
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.log.lock().unwrap().deliveries.clone()
    }

    /// How many deliveries so far (cheaper than `deliveries().len()` for a long log).
    pub fn count(&self) -> usize {
        self.log.lock().unwrap().deliveries.len()
    }
}

async fn handle(
    State(t): State<Target>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let headers: HashMap<String, String> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let id = headers.get("webhook-id").cloned().unwrap_or_default();
    let (status, delay, extra) = {
        let mut log = t.log.lock().unwrap();
        let n = log.per_task.entry((path.clone(), id)).or_default();
        *n += 1;
        let answer = (t.script)(&path, *n);
        log.deliveries.push(Delivery {
            path,
            headers,
            body: body.to_vec(),
            status: answer.0,
        });
        answer
    };
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    let mut resp = (StatusCode::from_u16(status).unwrap(), "target says hi").into_response();
    for (k, v) in extra {
        resp.headers_mut().insert(k, v.parse().unwrap());
    }
    resp
}

/// The compiled `backstop` binary.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_backstop")
}

/// A working directory with a config file and a database path.
pub struct Workdir {
    pub dir: tempfile::TempDir,
}

impl Workdir {
    pub fn new(config: &str) -> Workdir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("backstop.toml"), config).unwrap();
        Workdir { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("backstop.db")
    }

    pub fn db_url(&self) -> String {
        format!("sqlite://{}", self.db().display())
    }

    /// Runs `backstop ARGS` in the work dir; returns (success, stdout, stderr).
    pub async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::process::Command::new(bin())
            .args(args)
            .current_dir(self.path())
            .env_remove("BACKSTOP_DATABASE_URL")
            .env_remove("BACKSTOP_CONFIG")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs and expects success; returns stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "backstop {args:?} failed: {err}");
        out
    }

    /// Runs and parses stdout as JSON.
    pub async fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args).await;
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    }

    /// Starts `backstop serve` in the work dir.
    pub fn serve(&self) -> tokio::process::Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path().join("serve.log"))
            .unwrap();
        tokio::process::Command::new(bin())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .current_dir(self.path())
            .env_remove("BACKSTOP_DATABASE_URL")
            .env_remove("BACKSTOP_CONFIG")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    }

    /// Waits until the serve log shows an engine started `n` times.
    pub async fn wait_started(&self, n: usize) {
        wait_for(Duration::from_secs(20), "backstop serve to start", || async move {
            (self.serve_log().matches("engine started").count() >= n).then_some(())
        })
        .await
    }

    /// The base URL of the API of the most recently started `serve`, from its log.
    pub async fn api_base(&self) -> String {
        wait_for(
            Duration::from_secs(20),
            "backstop serve to listen",
            || async move {
                let log = self.serve_log();
                let at = log.rfind("api=http://")?;
                let rest = &log[at + 4..];
                let end = rest.find(char::is_whitespace)?;
                Some(rest[..end].to_string())
            },
        )
        .await
    }

    pub fn serve_log(&self) -> String {
        std::fs::read_to_string(self.path().join("serve.log")).unwrap_or_default()
    }
}

/// Sends a signal to a child.
pub fn signal(child: &tokio::process::Child, sig: i32) {
    let pid = child.id().expect("child is running") as i32;
    // SAFETY: kill(2) on a pid we spawned and still own.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}

/// Polls `check` every 50 ms until it returns Some, or panics after `limit`.
pub async fn wait_for<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value after `key=` on the first log line that mentions `what`.
pub fn logged(log: &str, what: &str, key: &str) -> Option<String> {
    let line = log.lines().find(|l| l.contains(what))?;
    let at = line.find(&format!("{key}="))? + key.len() + 1;
    let rest = &line[at..];
    Some(rest[..rest.find(char::is_whitespace).unwrap_or(rest.len())].to_string())
}
