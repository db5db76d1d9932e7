//! `backstop` raises its soft open-file limit to the hard one at start: with the usual soft
//! limit of 1024, a burst of connections would otherwise leave it no descriptor for its
//! health checks, its database or its outgoing deliveries.

mod common;

use common::*;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

fn limits() -> libc::rlimit {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we own.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim
}

/// "Max open files" soft and hard, from /proc/PID/limits.
fn open_files_of(pid: u32) -> Option<(String, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let mut f = line["Max open files".len()..].split_whitespace();
    Some((f.next()?.to_string(), f.next()?.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_raises_the_soft_open_file_limit_to_the_hard_one() {
    let hard = limits().rlim_max;
    if hard <= 1024 {
        println!("skipped: the hard open-file limit is {hard}, nothing to raise");
        return;
    }
    let w = Workdir::new("");
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(w.path())
        .env_remove("BACKSTOP_DATABASE_URL")
        .env_remove("BACKSTOP_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Start it with the usual soft limit of 1024. SAFETY: only getrlimit and setrlimit,
    // which are async-signal-safe, run between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
            lim.rlim_cur = 1024;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let seen = wait_for(
        Duration::from_secs(20),
        "serve's open-file limit",
        || async move {
            let (soft, hard) = open_files_of(pid)?;
            (soft != "1024").then_some((soft, hard))
        },
    )
    .await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        seen.0, seen.1,
        "soft limit raised to the hard one: {seen:?}"
    );
}
