//! NATS JetStream bridges and targets through a real engine on SQLite and a real nats-server
//! with JetStream (`BACKSTOP_TEST_NATS_URL`, e.g. `nats://127.0.0.1:4222`); skipped with a
//! visible line without one. Each test makes its own stream and deletes it.

use async_nats::jetstream::{self, consumer, stream};
use backstop_core::broker::{
    BridgeConfig, BridgeSource, BrokerTarget, BrokerUrl, Destination, KeySource, NatsConsumer,
};
use backstop_core::store::{GetByKeyParams, ListParams, TimelineParams};
use backstop_core::{EventType, KindConfig, Status, Target};
use backstop_engine::alerts::AlertName;
use backstop_engine::{Engine, EnqueueRequest};
mod brokers;
use brokers::{Running, alert_sink, options, server, store, unique, until, wait};
use futures_util::StreamExt;
use std::time::Duration;

/// A stream of its own taking `<prefix>.>`, deleted on drop.
struct Stream {
    js: jetstream::Context,
    name: String,
    prefix: String,
}

impl Stream {
    async fn new(url: &str) -> Stream {
        let client = async_nats::connect(url).await.unwrap();
        let js = jetstream::new(client);
        let name = unique("BACKSTOP_TEST").replace('.', "_");
        let prefix = unique("backstop-test");
        js.create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![format!("{prefix}.>")],
            ..Default::default()
        })
        .await
        .unwrap();
        Stream { js, name, prefix }
    }

    async fn publish(&self, subject: &str, body: &str) {
        self.js
            .publish(
                format!("{}.{subject}", self.prefix),
                body.to_string().into(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }

    async fn consumer_info(&self, name: &str) -> consumer::Info {
        self.js
            .get_stream(&self.name)
            .await
            .unwrap()
            .consumer_info(name)
            .await
            .unwrap()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let (js, name) = (self.js.clone(), self.name.clone());
        // The runtime may be going away with the test: best effort, on a thread of its own.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let _ = rt.block_on(js.delete_stream(&name));
        })
        .join()
        .ok();
    }
}

fn source(s: &Stream, consumer: &str, max_deliver: i64, max_ack_pending: i64) -> BridgeSource {
    BridgeSource::NatsStream(NatsConsumer {
        stream: s.name.clone(),
        consumer: consumer.into(),
        subject: None,
        ack_wait: Duration::from_secs(1),
        max_deliver,
        max_ack_pending,
    })
}

fn bridge(url: &str, source: BridgeSource, key: &str, prefetch: u16) -> BridgeConfig {
    BridgeConfig {
        name: "orders-js".into(),
        broker: BrokerUrl::new(url),
        source,
        kind: "order.created".into(),
        key: KeySource::parse(key).unwrap(),
        prefetch,
        dead_letters: false,
        max_message: 1 << 16,
    }
}

fn engine_with(store: std::sync::Arc<dyn backstop_core::Store>, b: BridgeConfig) -> Engine {
    Engine::builder(store)
        .kind(KindConfig::new("order.created", Target::Pull))
        .bridge(b)
        .options(options())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_becomes_tasks_with_their_origin_and_its_consumer_holds_nothing_after() {
    let Some(url) = server("BACKSTOP_TEST_NATS_URL") else {
        return;
    };
    let s = Stream::new(&url).await;
    for i in 0..200 {
        s.publish("created", &format!(r#"{{"order_id":"N-{i}"}}"#))
            .await;
    }
    // A producer's resend, a body that is not JSON, and one without the key.
    s.publish("created", r#"{"order_id":"N-7"}"#).await;
    s.publish("created", "not json").await;
    s.publish("created", r#"{"id":1}"#).await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let engine = engine_with(
        store.clone(),
        bridge(&url, source(&s, "backstop", -1, 1000), "/order_id", 64),
    );
    let run = Running::start(&engine);
    let v = until(&engine, "203 settled", |v| {
        v[0].inserted + v[0].deduplicated + v[0].rejected == 203
    })
    .await;
    assert_eq!(
        (v.received, v.inserted, v.deduplicated, v.rejected),
        (203, 200, 1, 2)
    );
    assert!(v.balanced && v.connected, "{v:?}");
    wait(
        "every delivery acked",
        Duration::from_secs(10),
        async || {
            let i = s.consumer_info("backstop").await;
            i.num_ack_pending == 0 && i.num_pending == 0
        },
    )
    .await;
    run.stop().await;
    // The first event keeps where the message came from.
    let t = store
        .get_by_key(GetByKeyParams {
            kind: "order.created".into(),
            key: "N-7".into(),
        })
        .await
        .unwrap()
        .unwrap();
    let tl = store.timeline(TimelineParams { id: t.id }).await.unwrap();
    let origin = tl[0].origin.clone().unwrap();
    assert_eq!(origin["broker"], "nats");
    assert_eq!(origin["stream"], s.name.as_str());
    assert_eq!(origin["stream_seq"], 8);
    assert!(
        tl.iter().any(|e| e.kind == EventType::Redelivered),
        "the resend is counted on the timeline: {tl:?}"
    );
    let rejected = store
        .list(ListParams {
            kind: Some("backstop.rejected.orders-js".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(rejected.len(), 2);
    assert!(rejected.iter().all(|t| t.status == Status::Failed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_past_max_deliver_becomes_a_failed_task_whose_reason_is_poison() {
    let Some(url) = server("BACKSTOP_TEST_NATS_URL") else {
        return;
    };
    let s = Stream::new(&url).await;
    s.publish("created", r#"{"order_id":"P-1"}"#).await;
    // Another consumer of the same durable takes it twice and never acks: after its second
    // delivery's AckWait, JetStream gives up on it.
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let b = bridge(&url, source(&s, "shared", 2, 1000), "/order_id", 8);
    drop(backstop_brokers::connect_consumer(&b).await.unwrap());
    let durable: consumer::PullConsumer =
        s.js.get_stream(&s.name)
            .await
            .unwrap()
            .get_consumer("shared")
            .await
            .unwrap();
    for delivery in 1..=2 {
        let mut got = durable
            .fetch()
            .max_messages(1)
            .expires(Duration::from_secs(3))
            .messages()
            .await
            .unwrap();
        let m = got.next().await.unwrap().unwrap();
        assert_eq!(m.info().unwrap().delivered, delivery);
        if delivery == 1 {
            tokio::time::sleep(Duration::from_millis(1200)).await;
        }
    }
    // The bridge runs while the second delivery's AckWait runs out.
    let engine = engine_with(store.clone(), b);
    let run = Running::start(&engine);
    until(&engine, "the poison message settled", |v| {
        v[0].inserted == 1
    })
    .await;
    run.stop().await;
    let t = store
        .get_by_key(GetByKeyParams {
            kind: "order.created".into(),
            key: "P-1".into(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.status, Status::Failed);
    let reason = t.last_error.unwrap_or_default();
    assert!(reason.starts_with("poison"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_held_near_max_ack_pending_show_and_raise_bridge_ack_pending() {
    let Some(url) = server("BACKSTOP_TEST_NATS_URL") else {
        return;
    };
    let s = Stream::new(&url).await;
    for i in 0..12 {
        s.publish("created", &format!(r#"{{"order_id":"A-{i}"}}"#))
            .await;
    }
    let b = bridge(&url, source(&s, "tight", -1, 10), "/order_id", 1);
    drop(backstop_brokers::connect_consumer(&b).await.unwrap());
    // A stuck worker on the same durable holds 9 of the 10 deliveries it allows.
    let durable: consumer::PullConsumer =
        s.js.get_stream(&s.name)
            .await
            .unwrap()
            .get_consumer("tight")
            .await
            .unwrap();
    let mut held = durable
        .fetch()
        .max_messages(9)
        .expires(Duration::from_secs(3))
        .messages()
        .await
        .unwrap();
    for _ in 0..9 {
        held.next().await.unwrap().unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let (alerts, got) = alert_sink(vec![AlertName::BridgeAckPending]).await;
    let engine = Engine::builder(store)
        .kind(KindConfig::new("order.created", Target::Pull))
        .bridge(b)
        .alerts(alerts)
        .options(options())
        .build()
        .unwrap();
    let run = Running::start(&engine);
    let v = until(&engine, "the ack-pending count", |v| {
        v[0].ack_pending.is_some_and(|a| a.near_limit())
    })
    .await;
    let a = v.ack_pending.unwrap();
    assert_eq!(a.max, 10);
    assert!(a.pending >= 9, "{a:?}");
    wait(
        "the bridge.ack_pending alert",
        Duration::from_secs(10),
        async || {
            got.lock()
                .unwrap()
                .iter()
                .any(|g| g["event"] == "bridge.ack_pending")
        },
    )
    .await;
    let first = got.lock().unwrap()[0].clone();
    assert!(
        first.to_string().contains("of the 10 its broker allows"),
        "{first}"
    );
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_target_publishes_each_task_once_with_its_id_and_succeeds_on_the_puback() {
    let Some(url) = server("BACKSTOP_TEST_NATS_URL") else {
        return;
    };
    let s = Stream::new(&url).await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let subject = format!("{}.out", s.prefix);
    let mut kind = KindConfig::new(
        "order.created.js",
        Target::Broker(BrokerTarget {
            broker: BrokerUrl::new(&url),
            destination: Destination::NatsSubject {
                subject: subject.clone(),
            },
        }),
    );
    kind.concurrency = 64;
    let mut lost = KindConfig::new(
        "order.lost",
        Target::Broker(BrokerTarget {
            broker: BrokerUrl::new(&url),
            destination: Destination::NatsSubject {
                subject: unique("backstop-test-nowhere"),
            },
        }),
    );
    lost.max_attempts = 1;
    let engine = Engine::builder(store.clone())
        .kind(kind)
        .kind(lost)
        .options(options())
        .build()
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..300 {
        let e = engine
            .enqueue(EnqueueRequest {
                kind: "order.created.js".into(),
                key: format!("O-{i}"),
                payload: format!(r#"{{"order_id":"O-{i}"}}"#).into_bytes(),
                ..Default::default()
            })
            .await
            .unwrap();
        ids.push(e.id.to_string());
    }
    let nowhere = engine
        .enqueue(EnqueueRequest {
            kind: "order.lost".into(),
            key: "L-1".into(),
            payload: br#"{"order_id":"L-1"}"#.to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    let run = Running::start(&engine);
    let st = store.clone();
    wait("300 published", Duration::from_secs(30), async || {
        st.counts(backstop_core::store::CountsParams {
            kind: Some("order.created.js".into()),
        })
        .await
        .unwrap()
        .succeeded
            == 300
    })
    .await;
    wait("the lost one failed", Duration::from_secs(10), async || {
        st.get(backstop_core::store::GetParams { id: nowhere.id })
            .await
            .unwrap()
            .is_some_and(|t| t.status == Status::Failed)
    })
    .await;
    run.stop().await;
    let t = store
        .get(backstop_core::store::GetParams { id: nowhere.id })
        .await
        .unwrap()
        .unwrap();
    assert!(
        t.last_error.as_deref().unwrap_or_default().contains("no"),
        "no stream takes the subject: {t:?}"
    );
    // Every task once in the stream, with its id as Nats-Msg-Id.
    let info =
        s.js.get_stream(&s.name)
            .await
            .unwrap()
            .info()
            .await
            .unwrap()
            .clone();
    assert_eq!(info.state.messages, 300);
    let durable: consumer::PullConsumer =
        s.js.get_stream(&s.name)
            .await
            .unwrap()
            .create_consumer(consumer::pull::Config {
                durable_name: Some("check".into()),
                ..Default::default()
            })
            .await
            .unwrap();
    let mut msgs = durable
        .fetch()
        .max_messages(300)
        .expires(Duration::from_secs(5))
        .messages()
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(m) = msgs.next().await {
        let m = m.unwrap();
        let h = m.headers.clone().unwrap();
        seen.push(h.get("Nats-Msg-Id").unwrap().to_string());
        if seen.len() == 300 {
            break;
        }
    }
    seen.sort();
    ids.sort();
    assert_eq!(seen, ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_the_stream_already_held_is_noted_on_its_attempt() {
    let Some(url) = server("BACKSTOP_TEST_NATS_URL") else {
        return;
    };
    let s = Stream::new(&url).await;
    let config =
        s.js.get_stream(&s.name)
            .await
            .unwrap()
            .cached_info()
            .config
            .clone();
    // No stream takes the subject for the first attempt: a permanent failure.
    s.js.delete_stream(&s.name).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let mut kind = KindConfig::new(
        "order.created.js",
        Target::Broker(BrokerTarget {
            broker: BrokerUrl::new(&url),
            destination: Destination::NatsSubject {
                subject: format!("{}.out", s.prefix),
            },
        }),
    );
    kind.max_attempts = 1;
    let engine = Engine::builder(store.clone())
        .kind(kind)
        .options(options())
        .build()
        .unwrap();
    let task = engine
        .enqueue(EnqueueRequest {
            kind: "order.created.js".into(),
            key: "O-1".into(),
            payload: br#"{"order_id":"O-1"}"#.to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    let run = Running::start(&engine);
    let status = async || {
        store
            .get(backstop_core::store::GetParams { id: task.id })
            .await
            .unwrap()
            .unwrap()
            .status
    };
    wait(
        "the first attempt failed",
        Duration::from_secs(10),
        async || status().await == Status::Failed,
    )
    .await;
    // The stream is back, holding the task already (as if an earlier publish had landed and
    // only its PubAck was lost); a person retries the task.
    s.js.create_stream(config).await.unwrap();
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", task.id.to_string().as_str());
    s.js.publish_with_headers(format!("{}.out", s.prefix), headers, "{}".into())
        .await
        .unwrap()
        .await
        .unwrap();
    engine
        .retry(backstop_engine::ManualRequest {
            id: task.id,
            actor: "test".into(),
            reason: None,
        })
        .await
        .unwrap();
    wait("the retry succeeded", Duration::from_secs(10), async || {
        status().await == Status::Succeeded
    })
    .await;
    run.stop().await;
    let t = store
        .get(backstop_core::store::GetParams { id: task.id })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.last_error, None);
    let tl = store
        .timeline(TimelineParams { id: task.id })
        .await
        .unwrap();
    let last = tl.iter().rfind(|e| e.kind == EventType::Attempt).unwrap();
    assert_eq!(last.attempt, Some(2));
    assert!(
        last.error
            .as_deref()
            .is_some_and(|n| n.contains("already held this task id")),
        "{last:?}"
    );
    let info =
        s.js.get_stream(&s.name)
            .await
            .unwrap()
            .info()
            .await
            .unwrap()
            .clone();
    assert_eq!(info.state.messages, 1, "stored once");
}
