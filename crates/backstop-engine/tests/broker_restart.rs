//! Brokers going away mid-stream: RabbitMQ restarted (`rabbitmqctl stop_app` / `start_app`)
//! and every Redis client connection killed (`CLIENT KILL TYPE normal`) while a bridge
//! consumes and a target publishes. Both recover by themselves: nothing is lost, every task
//! of the target succeeds, and every published task id is in the broker at least once.
//! Needs `BACKSTOP_TEST_AMQP_URL` and `BACKSTOP_TEST_REDIS_URL` (and `rabbitmqctl` on PATH);
//! skipped with a visible line otherwise. These tests restart shared brokers, so they live
//! in their own test binary (cargo runs binaries one at a time) and one at a time.

use backstop_core::broker::{
    AmqpQueue, BridgeConfig, BridgeSource, BrokerTarget, BrokerUrl, Destination, KeySource,
};
use backstop_core::store::CountsParams;
use backstop_core::{KindConfig, RetryPolicy, Store, Target};
use backstop_engine::{Engine, EnqueueRequest};
mod brokers;
use brokers::{Running, options, server, store, unique, wait};
use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use redis::AsyncCommands;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A kind whose publishes are retried quickly, so the test does not wait for long backoffs.
fn target_kind(name: &str, target: Target) -> KindConfig {
    let mut k = KindConfig::new(name, target);
    k.max_attempts = 100;
    k.retry = RetryPolicy::Schedule(vec![Duration::from_millis(200)]);
    k.timeout = Duration::from_secs(3);
    k
}

async fn counts(store: &Arc<dyn Store>, kind: &str) -> backstop_core::store::StatusCounts {
    store
        .counts(CountsParams {
            kind: Some(kind.into()),
        })
        .await
        .unwrap()
}

/// Publishes with confirms, reconnecting and trying again while the broker is away: the
/// producer an application would run.
async fn publish_until_confirmed(url: &str, queue: &str, bodies: Vec<String>) {
    let mut i = 0;
    while i < bodies.len() {
        let Ok(c) = Connection::connect(url, ConnectionProperties::default()).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let Ok(ch) = c.create_channel().await else {
            continue;
        };
        if ch
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .is_err()
        {
            continue;
        }
        while i < bodies.len() {
            let sent = ch
                .basic_publish(
                    ShortString::from(""),
                    ShortString::from(queue),
                    BasicPublishOptions::default(),
                    bodies[i].as_bytes(),
                    BasicProperties::default().with_delivery_mode(2),
                )
                .await;
            match sent {
                Ok(confirm) => match confirm.await {
                    Ok(c) if c.is_ack() => i += 1,
                    _ => break,
                },
                Err(_) => break,
            }
            if i % 50 == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rabbitmq_restart_mid_stream_stalls_the_bridge_and_the_target_only_while_it_lasts() {
    let Some(url) = server("BACKSTOP_TEST_AMQP_URL") else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let (inbox, outbox) = (
        unique("backstop.test.restart.in"),
        unique("backstop.test.restart.out"),
    );
    let c = Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = c.create_channel().await.unwrap();
    for q in [&inbox, &outbox] {
        ch.queue_declare(
            ShortString::from(q.as_str()),
            QueueDeclareOptions::durable(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    }
    drop(ch);
    drop(c);
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new("sms.send", Target::Pull))
        .kind(target_kind(
            "order.created",
            Target::Broker(BrokerTarget {
                broker: BrokerUrl::new(url.clone()),
                destination: Destination::Exchange {
                    exchange: String::new(),
                    routing_key: outbox.clone(),
                },
            }),
        ))
        .bridge(BridgeConfig {
            name: "sms-in".into(),
            broker: BrokerUrl::new(url.clone()),
            source: BridgeSource::AmqpQueue(AmqpQueue {
                queue: inbox.clone(),
                queue_type: None,
                durable: true,
                dead_letter_exchange: None,
                declare: true,
            }),
            kind: "sms.send".into(),
            key: KeySource::Pointer("/order_id".into()),
            prefetch: 32,
            dead_letters: false,
            max_message: 4096,
        })
        .options(options())
        .build()
        .unwrap();
    let run = Running::start(&engine);

    let bodies: Vec<String> = (0..1500)
        .map(|i| format!(r#"{{"order_id":"R-{i}"}}"#))
        .collect();
    let producer = {
        let (url, inbox) = (url.clone(), inbox.clone());
        tokio::spawn(async move { publish_until_confirmed(&url, &inbox, bodies).await })
    };
    let mut ids = Vec::new();
    for i in 0..300 {
        let e = engine
            .enqueue(EnqueueRequest {
                kind: "order.created".into(),
                key: format!("T-{i}"),
                payload: format!(r#"{{"t":{i}}}"#).into_bytes(),
                ..Default::default()
            })
            .await
            .unwrap();
        ids.push(e.id.to_string());
        if i == 100 {
            // The broker goes away while both directions are busy.
            let status = std::process::Command::new("rabbitmqctl")
                .arg("stop_app")
                .output()
                .unwrap();
            assert!(status.status.success(), "{status:?}");
            wait(
                "the bridge to notice",
                Duration::from_secs(20),
                async || !engine.bridges()[0].connected,
            )
            .await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let status = std::process::Command::new("rabbitmqctl")
                .arg("start_app")
                .output()
                .unwrap();
            assert!(status.status.success(), "{status:?}");
        }
    }
    producer.await.unwrap();
    wait(
        "every message in the ledger",
        Duration::from_secs(60),
        async || counts(&store, "sms.send").await.total() == 1500,
    )
    .await;
    wait(
        "every publish confirmed",
        Duration::from_secs(60),
        async || counts(&store, "order.created").await.succeeded == 300,
    )
    .await;
    let v = engine.bridges()[0].clone();
    assert!(v.connected && v.reconnects >= 1, "{v:?}");
    assert!(v.balanced, "{v:?}");
    run.stop().await;
    let c = Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = c.create_channel().await.unwrap();
    let mut seen = HashSet::new();
    while let Some(m) = ch
        .basic_get(
            ShortString::from(outbox.as_str()),
            BasicGetOptions { no_ack: true },
        )
        .await
        .unwrap()
    {
        seen.insert(
            m.delivery
                .properties
                .message_id()
                .as_ref()
                .unwrap()
                .to_string(),
        );
    }
    let missing: Vec<&String> = ids.iter().filter(|id| !seen.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "published ids missing from the broker: {missing:?}"
    );
    for q in [&inbox, &outbox] {
        let _ = ch
            .queue_delete(ShortString::from(q.as_str()), QueueDeleteOptions::default())
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_redis_connections_mid_stream_stall_the_bridge_and_the_target_only_briefly() {
    let Some(url) = server("BACKSTOP_TEST_REDIS_URL") else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let (list, processing, out) = (
        unique("backstop.test.restart.list"),
        unique("backstop.test.restart.processing"),
        unique("backstop.test.restart.out"),
    );
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new("sms.send", Target::Pull))
        .kind(target_kind(
            "order.created",
            Target::Broker(BrokerTarget {
                broker: BrokerUrl::new(url.clone()),
                destination: Destination::RedisStream {
                    stream: out.clone(),
                },
            }),
        ))
        .bridge(BridgeConfig {
            name: "sms-in".into(),
            broker: BrokerUrl::new(url.clone()),
            source: BridgeSource::RedisList {
                list: list.clone(),
                processing: processing.clone(),
            },
            kind: "sms.send".into(),
            key: KeySource::Pointer("/order_id".into()),
            prefetch: 32,
            dead_letters: false,
            max_message: 4096,
        })
        .options(options())
        .build()
        .unwrap();
    let run = Running::start(&engine);
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut ids = Vec::new();
    for i in 0..1000 {
        // The producer reconnects when its connection is killed too.
        loop {
            let Ok(mut r) = client.get_multiplexed_async_connection().await else {
                continue;
            };
            if r.lpush::<_, _, ()>(&list, format!(r#"{{"order_id":"L-{i}"}}"#))
                .await
                .is_ok()
            {
                break;
            }
        }
        if i % 4 == 0 {
            let e = engine
                .enqueue(EnqueueRequest {
                    kind: "order.created".into(),
                    key: format!("T-{i}"),
                    payload: b"{}".to_vec(),
                    ..Default::default()
                })
                .await
                .unwrap();
            ids.push(e.id.to_string());
        }
        if i == 400 || i == 700 {
            let mut admin = client.get_multiplexed_async_connection().await.unwrap();
            let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("normal")
                .query_async(&mut admin)
                .await;
        }
    }
    wait(
        "every item in the ledger",
        Duration::from_secs(60),
        async || counts(&store, "sms.send").await.total() == 1000,
    )
    .await;
    wait(
        "every publish confirmed",
        Duration::from_secs(60),
        async || counts(&store, "order.created").await.succeeded == 250,
    )
    .await;
    let mut r = client.get_multiplexed_async_connection().await.unwrap();
    wait(
        "the processing list to empty",
        Duration::from_secs(10),
        async || r.llen::<_, usize>(&processing).await.unwrap() == 0,
    )
    .await;
    let v = engine.bridges()[0].clone();
    assert!(v.connected && v.reconnects >= 1 && v.balanced, "{v:?}");
    run.stop().await;
    let entries: redis::streams::StreamRangeReply = r.xrange_all(&out).await.unwrap();
    let seen: HashSet<String> = entries
        .ids
        .iter()
        .map(|e| e.get::<String>("id").unwrap())
        .collect();
    let missing: Vec<&String> = ids.iter().filter(|id| !seen.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "published ids missing from the stream: {missing:?}"
    );
    let _: () = r.del(&[&list, &processing, &out]).await.unwrap();
}
