//! A NATS JetStream server killed (SIGKILL) and started again mid-stream while a bridge
//! consumes and a target publishes. The server is a private `nats-server` on a port and
//! store directory of its own, so the machine's shared server is never touched. Both sides
//! recover by themselves: every message becomes one task, every task of the target
//! succeeds, and the stream holds each published task id once (its `Nats-Msg-Id`).
//! Runs when `BACKSTOP_TEST_NATS_URL` is set (the NATS suites are on) and `nats-server` is
//! installed; skipped with a visible line otherwise.

use async_nats::jetstream::{self, consumer, stream};
use backstop_core::broker::{BridgeSource, Destination, KeySource, NatsConsumer};
mod brokers;
use brokers::{
    Running, counts, drill_engine, enqueue_numbered, patient_broker_kind, server, store, wait,
};
use futures_util::StreamExt;
use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BIN: &str = "/usr/sbin/nats-server";

/// A private nats-server with JetStream on `port`, keeping its streams in `dir`.
struct Server {
    port: u16,
    dir: std::path::PathBuf,
    child: Option<Child>,
}

impl Server {
    fn start(port: u16, dir: &std::path::Path) -> Server {
        let mut s = Server {
            port,
            dir: dir.to_path_buf(),
            child: None,
        };
        s.up();
        s
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn up(&mut self) {
        let child = Command::new(BIN)
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("nats-server did not listen on {}", self.port);
    }

    /// SIGKILL: no goodbye to the clients, JetStream recovers from its files.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn context(url: &str) -> jetstream::Context {
    jetstream::new(async_nats::connect(url).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_killed_mid_stream_stalls_the_bridge_and_the_target_only_while_it_is_down() {
    if server("BACKSTOP_TEST_NATS_URL").is_none() {
        return;
    }
    if !std::path::Path::new(BIN).exists() {
        eprintln!("skipped: {BIN} is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut nats = Server::start(free_port(), &dir.path().join("js"));
    let url = nats.url();
    let js = context(&url).await;
    for (name, subject) in [("IN", "in.>"), ("OUT", "out.>")] {
        js.create_stream(stream::Config {
            name: name.into(),
            subjects: vec![subject.into()],
            ..Default::default()
        })
        .await
        .unwrap();
    }
    const N: usize = 3000;
    for i in 0..N {
        // Not waiting for each PubAck: the last waits cover them all.
        let ack = js
            .publish("in.orders", format!(r#"{{"order_id":"I-{i}"}}"#).into())
            .await
            .unwrap();
        if i % 500 == 499 {
            ack.await.unwrap();
        }
    }
    drop(js);

    let ledger = tempfile::tempdir().unwrap();
    let store = store(&ledger).await;
    let out = patient_broker_kind(
        "order.out",
        &url,
        Destination::NatsSubject {
            subject: "out.orders".into(),
        },
        Duration::from_millis(200),
        Duration::from_secs(2),
    );
    let engine = drill_engine(
        &store,
        &url,
        BridgeSource::NatsStream(NatsConsumer {
            stream: "IN".into(),
            consumer: "backstop".into(),
            subject: None,
            ack_wait: Duration::from_secs(2),
            max_deliver: -1,
            max_ack_pending: 1000,
        }),
        KeySource::Pointer("/order_id".into()),
        out,
    );
    let ids = enqueue_numbered(&engine, "order.out", N).await;
    let run = Running::start(&engine);
    let count = async |kind: &str| counts(&store, kind).await;
    wait(
        "both sides under way",
        Duration::from_secs(30),
        async || {
            count("order.in").await.total() >= 100 && count("order.out").await.succeeded >= 100
        },
    )
    .await;
    nats.kill();
    let (ins, outs) = (
        count("order.in").await.total(),
        count("order.out").await.succeeded,
    );
    assert!(
        ins < N as u64 || outs < N as u64,
        "the server went away after everything was done: the test proves nothing"
    );
    wait(
        "the bridge to see it",
        Duration::from_secs(10),
        async || !engine.bridges()[0].connected,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    nats.up();
    wait("everything through", Duration::from_secs(90), async || {
        count("order.in").await.total() == N as u64
            && count("order.out").await.succeeded == N as u64
    })
    .await;
    // What the kill left delivered and unacknowledged comes again after AckWait, lands on
    // its task and is acked: the durable ends holding nothing.
    let js = context(&url).await;
    wait(
        "nothing left pending",
        Duration::from_secs(30),
        async || {
            let info = js
                .get_stream("IN")
                .await
                .unwrap()
                .consumer_info("backstop")
                .await
                .unwrap();
            (info.num_pending, info.num_ack_pending) == (0, 0)
        },
    )
    .await;
    let v = engine.bridges()[0].clone();
    assert!(v.reconnects >= 1 && v.balanced, "{v:?}");
    run.stop().await;
    let failed = count("order.out").await.failed + count("order.in").await.failed;
    assert_eq!(failed, 0);

    // Each published id once in OUT.
    let check: consumer::PullConsumer = js
        .get_stream("OUT")
        .await
        .unwrap()
        .create_consumer(consumer::pull::Config {
            durable_name: Some("check".into()),
            // A reader that acks nothing, so MaxAckPending never stops it.
            ack_policy: consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut seen = HashSet::new();
    let mut stored = 0;
    while stored < N {
        let mut batch = check
            .fetch()
            .max_messages(500)
            .expires(Duration::from_secs(2))
            .messages()
            .await
            .unwrap();
        let mut got = 0;
        while let Some(m) = batch.next().await {
            let m = m.unwrap();
            seen.insert(
                m.headers
                    .as_ref()
                    .unwrap()
                    .get("Nats-Msg-Id")
                    .unwrap()
                    .to_string(),
            );
            got += 1;
        }
        if got == 0 {
            break;
        }
        stored += got;
    }
    let missing: Vec<&String> = ids.difference(&seen).take(3).collect();
    let in_stream = js
        .get_stream("OUT")
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .state
        .messages;
    assert!(
        missing.is_empty(),
        "{} of {N} task ids not in the stream ({stored} read of {in_stream} stored), e.g. {missing:?}",
        ids.difference(&seen).count()
    );
    assert_eq!(stored, N, "each once: Nats-Msg-Id deduplicated the retries");
}
