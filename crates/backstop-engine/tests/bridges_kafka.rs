//! Kafka bridges and targets through a real engine on SQLite and a real Kafka-protocol broker
//! (`BACKSTOP_TEST_KAFKA_URL`, e.g. `kafka://127.0.0.1:9092`); skipped with a visible line
//! without one. Each test makes its own topics and leaves them (see `brokers::kafka`).

use backstop_brokers::{Outgoing, Published, Publisher, publisher};
use backstop_core::broker::{
    BridgeConfig, BridgeSource, BrokerTarget, BrokerUrl, Destination, KeySource,
};
use backstop_core::store::{CountsParams, GetByKeyParams, GetParams, ListParams, TimelineParams};
use backstop_core::{EventType, KindConfig, Status, Target};
use backstop_engine::{Engine, EnqueueRequest};
mod brokers;
use brokers::kafka::{committed, create_topic, high_watermarks, read_all};
use brokers::{Running, options, server, store, unique, until, wait};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Backstop's own Kafka publisher to `topic`, as the producer.
fn producer(url: &str, topic: &str) -> Box<dyn Publisher> {
    publisher(&BrokerTarget {
        broker: BrokerUrl::new(url),
        destination: Destination::KafkaTopic {
            topic: topic.into(),
        },
    })
}

/// Produces `body` keyed by `key` (none: an empty key).
async fn produce(p: &dyn Publisher, key: Option<&str>, body: &str) {
    let id = uuid::Uuid::now_v7().to_string();
    let out = p
        .publish(
            Outgoing {
                id: &id,
                kind: "producer",
                key: key.unwrap_or_default(),
                attempt: 1,
                traceparent: None,
                body: body.as_bytes(),
                since_enqueued: std::time::Duration::ZERO,
            },
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(out, Published::Confirmed);
}

fn bridge(url: &str, topic: &str, group: &str) -> BridgeConfig {
    BridgeConfig {
        name: "orders-in".into(),
        broker: BrokerUrl::new(url),
        source: BridgeSource::KafkaTopic {
            topic: topic.into(),
            group: group.into(),
        },
        kind: "order.created".into(),
        key: KeySource::MessageKey,
        prefetch: 64,
        dead_letters: false,
        max_message: 1 << 16,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_becomes_tasks_by_message_key_and_offsets_are_committed_only_after() {
    let Some(url) = server("BACKSTOP_TEST_KAFKA_URL") else {
        return;
    };
    let topic = unique("backstop-test-orders");
    create_topic(&url, &topic, 2).await;
    let p = producer(&url, &topic);
    let records = (0..100).map(|i| (format!("K-{i}"), format!(r#"{{"order_id":"K-{i}"}}"#)));
    let records: Vec<(String, String)> = records.collect();
    futures_util::future::join_all(
        records
            .iter()
            .map(|(k, b)| produce(&*p, Some(k.as_str()), b.as_str())),
    )
    .await;
    // A producer's resend of one record, and a record without a key.
    produce(&*p, Some("K-7"), r#"{"order_id":"K-7"}"#).await;
    produce(&*p, None, r#"{"order_id":"none"}"#).await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let group = unique("backstop-test-group");
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new("order.created", Target::Pull))
        .bridge(bridge(&url, &topic, &group))
        .options(options())
        .build()
        .unwrap();
    let run = Running::start(&engine);
    let v = until(&engine, "102 settled", |v| {
        v[0].inserted + v[0].deduplicated + v[0].rejected == 102
    })
    .await;
    assert_eq!(
        (v.received, v.inserted, v.deduplicated, v.rejected),
        (102, 100, 1, 1)
    );
    // Every offset committed once its task is: the group is at the end of each partition.
    let ends = high_watermarks(&url, &topic, 2).await;
    wait(
        "offsets committed to the end",
        Duration::from_secs(20),
        async || committed(&url, &group, &topic, 2).await == ends,
    )
    .await;
    run.stop().await;
    let c = store
        .counts(CountsParams {
            kind: Some("order.created".into()),
        })
        .await
        .unwrap();
    assert_eq!(c.pending, 100);
    let t = store
        .get_by_key(GetByKeyParams {
            kind: "order.created".into(),
            key: "K-7".into(),
        })
        .await
        .unwrap()
        .unwrap();
    let tl = store.timeline(TimelineParams { id: t.id }).await.unwrap();
    let origin = tl[0].origin.clone().unwrap();
    assert_eq!(origin["broker"], "kafka");
    assert_eq!(origin["topic"], topic.as_str());
    assert!(
        origin["partition"].is_i64() && origin["offset"].is_i64(),
        "{origin}"
    );
    assert!(
        tl.iter().any(|e| e.kind == EventType::Redelivered),
        "the resend is counted: {tl:?}"
    );
    let rejected = store
        .list(ListParams {
            kind: Some("backstop.rejected.orders-in".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].status, Status::Failed);
    assert!(
        rejected[0]
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("the key at message_key is empty"),
        "{:?}",
        rejected[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_target_produces_each_task_by_its_business_key_with_its_id() {
    let Some(url) = server("BACKSTOP_TEST_KAFKA_URL") else {
        return;
    };
    let topic = unique("backstop-test-out");
    create_topic(&url, &topic, 3).await;
    let target = |topic: &str| {
        Target::Broker(BrokerTarget {
            broker: BrokerUrl::new(&url),
            destination: Destination::KafkaTopic {
                topic: topic.into(),
            },
        })
    };
    let mut lost = KindConfig::new("order.lost", target(&unique("backstop-test-nowhere")));
    lost.max_attempts = 1;
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::builder(store(&dir).await)
        .kind(KindConfig::new("order.created.out", target(&topic)))
        .kind(KindConfig::new("order.paid.out", target(&topic)))
        .kind(lost)
        .options(options())
        .build()
        .unwrap();
    let store = engine.store().clone();
    let mut ids = HashSet::new();
    for kind in ["order.created.out", "order.paid.out"] {
        for i in 0..60 {
            let e = engine
                .enqueue(EnqueueRequest {
                    kind: kind.into(),
                    key: format!("O-{i}"),
                    payload: format!(r#"{{"order_id":"O-{i}"}}"#).into_bytes(),
                    ..Default::default()
                })
                .await
                .unwrap();
            ids.insert(e.id.to_string());
        }
    }
    let nowhere = engine
        .enqueue(EnqueueRequest {
            kind: "order.lost".into(),
            key: "L-1".into(),
            payload: b"{}".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    let run = Running::start(&engine);
    let s = store.clone();
    wait("120 produced", Duration::from_secs(60), async || {
        let a = s
            .counts(CountsParams {
                kind: Some("order.created.out".into()),
            })
            .await
            .unwrap()
            .succeeded;
        let b = s
            .counts(CountsParams {
                kind: Some("order.paid.out".into()),
            })
            .await
            .unwrap()
            .succeeded;
        a + b == 120
    })
    .await;
    wait(
        "the unknown topic failed",
        Duration::from_secs(60),
        async || {
            s.get(GetParams { id: nowhere.id })
                .await
                .unwrap()
                .is_some_and(|t| t.status == Status::Failed)
        },
    )
    .await;
    run.stop().await;
    let lost = store
        .get(GetParams { id: nowhere.id })
        .await
        .unwrap()
        .unwrap();
    assert!(
        lost.last_error
            .as_deref()
            .unwrap_or_default()
            .contains("Unknown topic"),
        "{lost:?}"
    );
    let records = read_all(&url, &topic, 3, Duration::from_secs(30)).await;
    assert_eq!(records.len(), 120, "each task once");
    let seen: HashSet<String> = records
        .iter()
        .map(|r| r.headers["backstop-task-id"].clone())
        .collect();
    assert_eq!(seen, ids);
    // One business key, one partition: an order's created and paid stay in order.
    let mut partition_of: HashMap<String, i32> = HashMap::new();
    for r in &records {
        let key = r.key.clone().expect("keyed by the business key");
        assert_eq!(r.headers["backstop-key"], key);
        if let Some(p) = partition_of.insert(key.clone(), r.partition) {
            assert_eq!(p, r.partition, "{key} in two partitions");
        }
    }
    assert_eq!(partition_of.len(), 60);
}
