//! The `backstop serve` processes of a scenario: each with its own work dir, config file, log
//! and fixed API port (kept across restarts, so the client finds it again), killed with
//! SIGKILL and restarted.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The kind every scenario enqueues.
pub const KIND: &str = "chaos.sink";

/// How the processes are configured.
#[derive(Clone, Debug)]
pub struct FleetConfig {
    /// The `backstop` binary.
    pub binary: PathBuf,
    /// The target's base URL.
    pub target: String,
    /// The kind's per-attempt timeout.
    pub timeout: Duration,
    /// The kind's lease (a killed process's tasks are rescued about this long after).
    pub lease: Duration,
}

impl FleetConfig {
    fn toml(&self) -> String {
        format!(
            "[engine]\npoll_interval = \"50ms\"\nrescue_interval = \"200ms\"\ngrace = \"2s\"\n\
             leader_lease = \"2s\"\nleader_renew = \"300ms\"\n\
             [kinds.\"{KIND}\"]\nurl = \"{}/sink\"\nmax_attempts = 1000\n\
             backoff = {{ schedule = [\"100ms\", \"200ms\", \"400ms\"] }}\n\
             timeout = \"{}ms\"\nconcurrency = 16\nlease = \"{}ms\"\n",
            self.target,
            self.timeout.as_millis(),
            self.lease.as_millis()
        )
    }
}

/// One `backstop serve` slot: restarted in place after a kill.
pub struct Process {
    dir: PathBuf,
    port: u16,
    database: String,
    binary: PathBuf,
    child: Option<Child>,
}

impl Process {
    /// `http://127.0.0.1:PORT`
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts it (again), with `database` as its ledger from now on.
    pub fn start(&mut self, database: &str) -> anyhow::Result<()> {
        self.database = database.to_string();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("serve.log"))?;
        let child = Command::new(&self.binary)
            .args(["serve", "--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--database", &self.database])
            .current_dir(&self.dir)
            .env_remove("BACKSTOP_DATABASE_URL")
            .env_remove("BACKSTOP_CONFIG")
            .env_remove("BACKSTOP_LISTEN")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", self.binary.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Starts it again on the database it had.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        let database = self.database.clone();
        self.start(&database)
    }

    /// SIGKILL, and waits for it to be gone.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        child.start_kill()?;
        child.wait().await?;
        Ok(())
    }

    /// How it ended, if it ended by itself (nobody killed or stopped it).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// SIGTERM, then SIGKILL if it has not ended within `grace`.
    pub async fn stop(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = child.id() {
            // SAFETY: kill(2) on a child we spawned and have not reaped.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        if tokio::time::timeout(grace, child.wait()).await.is_err() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// Waits until `/readyz` answers 200 (the database is reachable and migrated).
    pub async fn ready(&mut self, http: &reqwest::Client, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        let url = format!("{}/readyz", self.base());
        loop {
            if let Ok(r) = http.get(&url).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                bail!(
                    "backstop serve exited ({status}) before it was ready: {}",
                    self.log_tail()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "backstop serve was not ready within {within:?}: {}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The last lines of its log, for an error message.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }
}

/// Every process of a scenario.
pub struct Fleet {
    pub processes: Vec<Process>,
}

impl Fleet {
    /// Writes `n` work dirs under `dir` (config, log) and picks a free port for each.
    pub fn new(dir: &Path, n: usize, config: &FleetConfig) -> anyhow::Result<Fleet> {
        let mut processes = Vec::new();
        for i in 0..n {
            let pdir = dir.join(format!("process-{i}"));
            std::fs::create_dir_all(&pdir)?;
            std::fs::write(pdir.join("backstop.toml"), config.toml())?;
            processes.push(Process {
                dir: pdir,
                port: free_port()?,
                database: String::new(),
                binary: config.binary.clone(),
                child: None,
            });
        }
        Ok(Fleet { processes })
    }

    /// The API base URL of every process (running or not: a killed one comes back on it).
    pub fn bases(&self) -> Vec<String> {
        self.processes.iter().map(Process::base).collect()
    }

    /// Starts every process on `database` and waits until each is ready.
    pub async fn start(&mut self, database: &str, http: &reqwest::Client) -> anyhow::Result<()> {
        for p in &mut self.processes {
            p.start(database)?;
        }
        for p in &mut self.processes {
            p.ready(http, Duration::from_secs(60)).await?;
        }
        Ok(())
    }

    /// Stops every process (SIGTERM, then SIGKILL).
    pub async fn stop(&mut self) {
        for p in &mut self.processes {
            p.stop(Duration::from_secs(10)).await;
        }
    }
}

/// A port nothing listens on now (the OS's pick, released at once).
fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}
