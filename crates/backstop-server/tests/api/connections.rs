//! Connections that would hold the process: half-sent headers, idle keep-alives, a body that
//! never arrives, and more clients than the cap. Real sockets on loopback.

use crate::harness::{Api, Setup};
use backstop_server::{ConnectionLimits, Limits};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn setup(header: Duration, body: Duration, max_connections: usize) -> Setup {
    Setup {
        limits: Limits {
            body_timeout: body,
            ..Limits::default()
        },
        connections: ConnectionLimits {
            header_read_timeout: header,
            max_connections,
        },
        ..Setup::default()
    }
}

async fn connect(api: &Api) -> TcpStream {
    TcpStream::connect(api.base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Reads until the server closes the connection; returns what it sent, or `None` if it
/// was still open after `within`.
async fn read_to_close(s: &mut TcpStream, within: Duration) -> Option<String> {
    let mut got = Vec::new();
    match tokio::time::timeout(within, s.read_to_end(&mut got)).await {
        Ok(_) => Some(String::from_utf8_lossy(&got).into_owned()),
        Err(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_headers_and_idle_keep_alives_are_closed_after_the_header_deadline() {
    let api = Api::start(setup(Duration::from_secs(1), Duration::from_secs(30), 512)).await;
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut s = connect(&api).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(s);
    }
    let mut silent = connect(&api).await;
    let mut idle = connect(&api).await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    for s in &mut slow {
        assert!(
            read_to_close(s, Duration::from_secs(5)).await.is_some(),
            "a half-sent request was still open after 5s"
        );
    }
    assert!(
        read_to_close(&mut silent, Duration::from_secs(5))
            .await
            .is_some(),
        "a connection that sent nothing was still open after 5s"
    );
    let answered = read_to_close(&mut idle, Duration::from_secs(5))
        .await
        .expect("an idle keep-alive connection is closed after the header deadline");
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // And the server still answers.
    let (s, _) = api.get("/healthz").await;
    assert_eq!(s, 200);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_shorter_than_its_content_length_gets_a_408_after_the_body_deadline() {
    let api = Api::start(setup(Duration::from_secs(10), Duration::from_secs(1), 512)).await;
    let mut s = connect(&api).await;
    s.write_all(
        b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
          Content-Length: 1000\r\n\r\n{\"kind\":",
    )
    .await
    .unwrap();
    let started = Instant::now();
    let answer = read_to_close(&mut s, Duration::from_secs(5))
        .await
        .expect("the connection is answered and closed after the body deadline");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("api.body_timeout"), "{answer}");
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(api.task_count().await, 0);
    api.stop().await;
}

/// More half-sent requests than the cap: the next client waits in the backlog (the process
/// keeps its descriptors) and is served as soon as the header deadline frees a slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_cap_new_clients_wait_and_are_served_when_slots_free() {
    let api = Api::start(setup(Duration::from_secs(2), Duration::from_secs(30), 8)).await;
    let mut held = Vec::new();
    for _ in 0..8 {
        let mut s = connect(&api).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let mut next = connect(&api).await;
    next.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut first = [0u8; 1];
    assert!(
        tokio::time::timeout(Duration::from_millis(800), next.read(&mut first))
            .await
            .is_err(),
        "the ninth connection is not served while eight hold every slot"
    );
    let rest = read_to_close(&mut next, Duration::from_secs(6))
        .await
        .expect("served once the held connections time out");
    assert!(rest.starts_with("HTTP/1.1 200"), "{rest}");
    assert!(started.elapsed() < Duration::from_secs(6));
    api.stop().await;
}
