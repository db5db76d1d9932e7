//! Crash test for checkpoints: a pull worker runs one job over 100,000 items, saving a
//! checkpoint every 1,000, and is SIGKILLed at 20 random moments (each time a new worker
//! resumes once the dead one's lease lapses). Before that, a worker is frozen (SIGSTOP) until
//! its lease is lost and another resumes the job, then thawed: its next checkpoint is refused
//! and recorded. In the end every item was processed, and the reprocessing is at most 1,000
//! items per interruption.

mod common;

use common::*;
use rand::Rng;
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::time::Duration;
use tokio::process::{Child, Command};

const ITEMS: usize = 100_000;
const EVERY: usize = 1_000;
const KILLS: usize = 20;

const CONFIG: &str = "[engine]\npoll_interval = \"20ms\"\nrescue_interval = \"100ms\"\ngrace = \"1s\"\n\
     [kinds.\"batch.import\"]\ntarget = \"pull\"\nmax_attempts = 50\nlease = \"1s\"\n";

/// A worker process: this test binary again, running only [`checkpoint_worker_process`].
fn spawn(base: &str, name: &str, log: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "checkpoint_worker_process",
            "--ignored",
            "--nocapture",
        ])
        .env(
            "CHECKPOINT_WORKER",
            format!("{base} {name} {}", log.display()),
        )
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The worker process's body (ignored as a test: [`spawn`] runs it, with its arguments in
/// `CHECKPOINT_WORKER`): a resumable pull worker. It leases the long job, resumes from the
/// job's last checkpoint, saves a checkpoint every [`EVERY`] items and heartbeats, and
/// completes the job at the end. Each item it processes is appended to the log with one
/// `write(2)`, so a SIGKILL loses no record of work done. When a checkpoint or heartbeat
/// answers `409` (the lease was lost: a zombie), it writes `rejected` and exits with status 3;
/// a refused heartbeat is followed by one last checkpoint, so a zombie's refusal is always a
/// checkpoint's.
#[tokio::test(flavor = "current_thread")]
#[ignore = "the worker process of a_long_job_killed_twenty_times_resumes_from_its_checkpoints"]
async fn checkpoint_worker_process() {
    let args = std::env::var("CHECKPOINT_WORKER").expect("run by the crash test");
    let args: Vec<&str> = args.splitn(3, ' ').collect();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(args[2])
        .expect("open the log");
    let mut w = Worker {
        http: reqwest::Client::new(),
        base: args[0].to_string(),
        name: args[1].to_string(),
        log,
    };
    loop {
        let body = json!({"kinds": [KIND], "worker": w.name, "lease": "1s", "wait": "2s"});
        let (s, got) = w.post("/v1/leases", body).await;
        assert_eq!(s, 200, "lease: {got}");
        if let Some(job) = got["tasks"].as_array().and_then(|t| t.first()).cloned() {
            w.run_job(&job).await;
        }
    }
}

const KIND: &str = "batch.import";

struct Worker {
    http: reqwest::Client,
    base: String,
    name: String,
    log: std::fs::File,
}

impl Worker {
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        loop {
            match self
                .http
                .post(format!("{}{path}", self.base))
                .json(&body)
                .send()
                .await
            {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let v = r.json().await.unwrap_or(Value::Null);
                    return (status, v);
                }
                // The server restarting: try again.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    fn record(&mut self, line: &str) {
        // One write per line, unbuffered: what was written survives a SIGKILL.
        self.log.write_all(line.as_bytes()).expect("log write");
    }

    /// Saves the cursor and extends the lease; exits as a zombie when the lease was lost.
    async fn checkpoint(&mut self, token: &str, offset: u64) {
        let (s, p) = self
            .post(
                &format!("/v1/leases/{token}/checkpoint"),
                json!({"cursor": {"offset": offset}}),
            )
            .await;
        if s == 409 {
            self.record("rejected\n");
            std::process::exit(3);
        }
        assert_eq!(s, 204, "checkpoint: {p}");
        let (s, p) = self
            .post(&format!("/v1/leases/{token}/heartbeat"), Value::Null)
            .await;
        if s == 409 {
            // Frozen between the checkpoint and the heartbeat: before it stops, the worker
            // saves where it is, and that checkpoint is the one refused (and recorded).
            let (s, p) = self
                .post(
                    &format!("/v1/leases/{token}/checkpoint"),
                    json!({"cursor": {"offset": offset}}),
                )
                .await;
            assert_eq!(s, 409, "a lost lease's checkpoint: {p}");
            self.record("rejected\n");
            std::process::exit(3);
        }
        assert_eq!(s, 200, "heartbeat: {p}");
    }

    async fn run_job(&mut self, job: &Value) {
        let token = job["token"].as_str().expect("token").to_string();
        let start = job["checkpoint"]["offset"].as_u64().unwrap_or(0);
        self.record(&format!("resume {start}\n"));
        for i in start..ITEMS as u64 {
            // The work: a little time per item.
            if i % 100 == 0 {
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            self.record(&format!("{i}\n"));
            if (i + 1) % EVERY as u64 == 0 && i + 1 < ITEMS as u64 {
                self.checkpoint(&token, i + 1).await;
            }
        }
        let (s, p) = self
            .post(
                &format!("/v1/leases/{token}/complete"),
                json!({"outcome": "succeeded"}),
            )
            .await;
        if s == 409 {
            self.record("rejected\n");
            std::process::exit(3);
        }
        assert_eq!(s, 200, "complete: {p}");
        self.record("done\n");
    }
}

fn log_text(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

/// Waits until the log shows `n` resumptions (a worker leased the job and started on it).
async fn resumed(log: &Path, n: usize) {
    wait_for(
        Duration::from_secs(30),
        "a worker to resume the job",
        || async { (log_text(log).matches("resume").count() >= n).then_some(()) },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_job_killed_twenty_times_resumes_from_its_checkpoints() {
    let w = Workdir::new(CONFIG);
    let _serve = w.serve();
    let base = w.api_base().await;
    let http = reqwest::Client::new();
    let job: Value = http
        .post(format!("{base}/v1/tasks"))
        .json(
            &json!({"kind": "batch.import", "key": "import-2026-12", "payload": {"items": ITEMS}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = job["id"].as_str().expect("enqueued").to_string();
    let log = w.path().join("work.log");

    // A zombie: frozen mid-job until its lease is lost and another worker resumes, then thawed.
    let mut zombie = spawn(&base, "zombie", &log);
    resumed(&log, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    signal(&zombie, libc::SIGSTOP);
    let mut current = spawn(&base, "w0", &log);
    resumed(&log, 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    signal(&zombie, libc::SIGCONT);
    let status = tokio::time::timeout(Duration::from_secs(10), zombie.wait())
        .await
        .expect("the zombie stops at its next checkpoint")
        .unwrap();
    assert_eq!(
        status.code(),
        Some(3),
        "the zombie's checkpoint was refused"
    );

    // Twenty SIGKILLs, each at a random moment after a worker resumed.
    for k in 1..=KILLS {
        let ms = rand::rng().random_range(50..600);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        assert!(
            !log_text(&log).contains("done"),
            "the job ended before kill {k}: make it longer"
        );
        signal(&current, libc::SIGKILL);
        current.wait().await.unwrap();
        current = spawn(&base, &format!("w{k}"), &log);
        resumed(&log, 2 + k).await;
    }
    wait_for(Duration::from_secs(120), "the job to finish", || async {
        log_text(&log).contains("done").then_some(())
    })
    .await;
    signal(&current, libc::SIGKILL);

    let text = log_text(&log);
    let mut seen = vec![0u32; ITEMS];
    let mut total = 0usize;
    for line in text.lines() {
        if let Ok(i) = line.parse::<usize>() {
            seen[i] += 1;
            total += 1;
        }
    }
    let missing = seen.iter().filter(|n| **n == 0).count();
    assert_eq!(missing, 0, "every item is processed");
    let interruptions = KILLS + 1;
    let reprocessed = total - ITEMS;
    assert!(
        reprocessed <= EVERY * interruptions,
        "reprocessed {reprocessed} items after {interruptions} interruptions: over {EVERY} each"
    );
    assert!(reprocessed > 0, "the kills landed mid-job");
    eprintln!("{ITEMS} items, {interruptions} interruptions, {reprocessed} reprocessed");

    let t: Value = http
        .get(format!("{base}/v1/tasks/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["status"], "succeeded", "{t}");
    let events = t["events"].as_array().unwrap();
    let rejected: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "checkpoint_rejected")
        .collect();
    assert_eq!(
        rejected.len(),
        1,
        "the zombie's checkpoint is on the timeline: {events:?}"
    );
    assert_eq!(rejected[0]["worker"], "pull:zombie");
}
