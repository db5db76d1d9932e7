//! `backstop doctor` says a person is needed (exit 1, with the problem named) when dead
//! letters wait or when every recent attempt of a kind fails, and OK when all is well.

mod common;

use common::*;
use std::sync::Arc;
use std::time::Duration;

fn config(base: &str) -> String {
    format!(
        "[engine]\npoll_interval = \"50ms\"\nrescue_interval = \"100ms\"\n\
         [kinds.\"t.ok\"]\nurl = \"{base}/ok\"\nsecret = \"{SECRET}\"\n\
         [kinds.\"t.bad\"]\nurl = \"{base}/bad\"\nsecret = \"{SECRET}\"\n\
         [kinds.\"t.down\"]\nurl = \"{base}/down\"\nsecret = \"{SECRET}\"\nmax_attempts = 50\n\
         backoff = {{ schedule = [\"1h\"] }}\n"
    )
}

async fn problems(w: &Workdir) -> (bool, Vec<String>) {
    let (ok, out, err) = w.run(&["doctor", "--json"]).await;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    let p = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    (ok, p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_needs_a_person_for_dead_letters_and_a_failing_kind() {
    let t = TestTarget::start(Arc::new(|path, _| match path {
        "/ok" => (200, None, vec![]),
        "/bad" => (400, None, vec![]),
        _ => (503, None, vec![]),
    }))
    .await;
    let w = Workdir::new(&config(&t.base));
    let _serve = w.serve();
    w.api_base().await;
    w.ok(&["enqueue", "t.ok", "ok-1", "--payload", "{}"]).await;
    wait_for(Duration::from_secs(20), "a healthy ledger", || async {
        let (ok, p) = problems(&w).await;
        (ok && p.is_empty()).then_some(())
    })
    .await;

    w.ok(&["enqueue", "t.bad", "bad-1", "--payload", "{}"])
        .await;
    let p = wait_for(Duration::from_secs(20), "the dead letter", || async {
        let (ok, p) = problems(&w).await;
        (!ok && p.iter().any(|p| p.contains("dead letter"))).then_some(p)
    })
    .await;
    assert!(
        p.iter()
            .any(|p| p.starts_with("t.bad: 1 dead letter(s) waiting")),
        "{p:?}"
    );

    for i in 0..3 {
        w.ok(&["enqueue", "t.down", &format!("down-{i}"), "--payload", "{}"])
            .await;
    }
    let p = wait_for(Duration::from_secs(20), "the failing kind", || async {
        let (ok, p) = problems(&w).await;
        (!ok && p.iter().any(|p| p.starts_with("t.down:"))).then_some(p)
    })
    .await;
    let down = p.iter().find(|p| p.starts_with("t.down:")).unwrap();
    assert!(down.contains("failed") && down.contains("503"), "{down}");
    assert!(
        !p.iter().any(|p| p.starts_with("t.ok:")),
        "a kind that delivers is not a problem: {p:?}"
    );
}
