//! Crash tests of bridges, one per broker: `backstop serve` is killed with SIGKILL 20 times
//! while its bridge takes 10,000 messages from a real RabbitMQ queue (`BACKSTOP_TEST_AMQP_URL`),
//! Redis list (`BACKSTOP_TEST_REDIS_URL`), JetStream stream (`BACKSTOP_TEST_NATS_URL`) or
//! Kafka topic (`BACKSTOP_TEST_KAFKA_URL`), restarted each time, with
//! `engine.bridge_ack_delay` widening the window between a batch's commit and its ack so that
//! kills land there. In the end there is exactly one task per message, none lost and none
//! doubled, nothing is left unacknowledged in the broker, and the timelines count the
//! redeliveries the kills caused.

mod common;

use backstop_core::EventType;
use backstop_core::store::{CountsParams, ListParams, TimelineParams};
use common::*;
use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use rand::Rng;
use redis::AsyncCommands;
use std::sync::Arc;
use std::time::Duration;

const MESSAGES: usize = 10_000;
const KILLS: usize = 20;

fn body(i: usize) -> String {
    format!(r#"{{"order_id":"O-{i}","to":"+8613800000000"}}"#)
}

fn config(db: &str, bridge: &str) -> String {
    format!(
        "database = \"{db}\"\n\
         [engine]\npoll_interval = \"50ms\"\nbridge_ack_delay = \"30ms\"\nbridge_beat = \"200ms\"\n\
         [kinds.\"sms.send\"]\ntarget = \"pull\"\n\
         [bridges.sms-in]\n{bridge}kind = \"sms.send\"\nkey = \"/order_id\"\nprefetch = 64\n"
    )
}

fn server(var: &str) -> Option<String> {
    let u = std::env::var(var).ok().filter(|u| !u.is_empty());
    if u.is_none() {
        eprintln!("skipped: {var} is not set");
    }
    u
}

async fn tasks(store: &Arc<dyn backstop_core::Store>) -> usize {
    store
        .counts(CountsParams {
            kind: Some("sms.send".into()),
        })
        .await
        .map(|c| c.total() as usize)
        .unwrap_or(0)
}

/// Kills and restarts `serve` while the bridge drains, then lets a last process finish;
/// `left` says how many messages the broker still holds unacknowledged; `rejoin_after` is
/// how long the last process waits for the killed members to be gone from the broker.
async fn drill<F, Fut>(bridge: &str, left: F, rejoin_after: Duration)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("backstop.db").display());
    let w = Workdir::new(&config(&db, bridge));
    let store = backstop::open_store(&db).await.unwrap();
    let mut killed = 0;
    while killed < KILLS {
        let before = tasks(&store).await;
        let mut serve = w.serve();
        // Kill while messages flow: once some have landed, at a random moment.
        let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
        while tasks(&store).await < before + 50 && tokio::time::Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let pause = rand::rng().random_range(0..60);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        signal(&serve, libc::SIGKILL);
        assert!(!serve.wait().await.unwrap().success());
        killed += 1;
        if tasks(&store).await >= MESSAGES {
            break;
        }
    }
    assert!(
        killed >= 10,
        "only {killed} kills landed before the drain ended"
    );

    // A last process takes the rest.
    tokio::time::sleep(rejoin_after).await;
    let mut serve = w.serve();
    let s = store.clone();
    wait_for(
        Duration::from_secs(120),
        "every message in the ledger",
        || {
            let s = s.clone();
            async move { (tasks(&s).await >= MESSAGES).then_some(()) }
        },
    )
    .await;
    let w2 = &w;
    wait_for(
        Duration::from_secs(30),
        "the bridge to settle",
        || async move {
            let v = w2.json(&["bridges", "list", "--json"]).await;
            let b = v["bridges"]
                .as_array()?
                .iter()
                .find(|b| b["stale"] == false && b["connected"] == true)?
                .clone();
            (b["in_flight"] == 0 && b["balanced"] == true && b["received"].as_u64()? > 0)
                .then_some(())
        },
    )
    .await;
    wait_for(
        Duration::from_secs(10),
        "nothing left in the broker",
        || async { (left().await == 0).then_some(()) },
    )
    .await;
    signal(&serve, libc::SIGTERM);
    assert!(serve.wait().await.unwrap().success());

    let all = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(
        all.total() as usize,
        MESSAGES,
        "one task per message: {all:?}"
    );
    assert_eq!(all.pending as usize, MESSAGES);
    let list = store
        .list(ListParams {
            kind: Some("sms.send".into()),
            limit: MESSAGES,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut keys: Vec<&str> = list.iter().map(|t| t.key.as_str()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), MESSAGES);
    // The kills left committed messages unacknowledged: they came again and were counted.
    let mut redelivered = 0;
    for t in &list {
        let tl = store.timeline(TimelineParams { id: t.id }).await.unwrap();
        redelivered += tl
            .iter()
            .filter(|e| e.kind == EventType::Redelivered)
            .count();
    }
    assert!(
        redelivered > 0,
        "no kill landed between a commit and its ack"
    );
    eprintln!("{killed} kills, {redelivered} redeliveries absorbed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_sigkill_between_commit_and_ack_loses_and_doubles_nothing() {
    let Some(url) = server("BACKSTOP_TEST_AMQP_URL") else {
        return;
    };
    let queue = format!("backstop.test.crash.{}", uuid::Uuid::now_v7().simple());
    let conn = Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let declare = |passive| QueueDeclareOptions {
        passive,
        durable: true,
        ..QueueDeclareOptions::default()
    };
    let q = || ShortString::from(queue.as_str());
    ch.queue_declare(q(), declare(false), FieldTable::default())
        .await
        .unwrap();
    for i in 0..MESSAGES {
        // Not waiting for each confirm: the last wait covers them all.
        ch.basic_publish(
            ShortString::from(""),
            q(),
            BasicPublishOptions::default(),
            body(i).as_bytes(),
            BasicProperties::default().with_delivery_mode(2),
        )
        .await
        .unwrap();
    }
    assert!(ch.wait_for_confirms().await.unwrap().is_empty());
    let bridge = format!("broker = \"{url}\"\nqueue = \"{queue}\"\n");
    drill(
        &bridge,
        || async {
            ch.queue_declare(q(), declare(true), FieldTable::default())
                .await
                .unwrap()
                .message_count() as usize
        },
        Duration::ZERO,
    )
    .await;
    let _ = ch.queue_delete(q(), QueueDeleteOptions::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_list_sigkill_between_commit_and_ack_loses_and_doubles_nothing() {
    let Some(url) = server("BACKSTOP_TEST_REDIS_URL") else {
        return;
    };
    let list = format!("backstop-test:crash:{}", uuid::Uuid::now_v7().simple());
    let processing = format!("{list}:processing");
    let mut r = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for chunk in (0..MESSAGES).collect::<Vec<_>>().chunks(1000) {
        let items: Vec<String> = chunk.iter().map(|i| body(*i)).collect();
        let _: () = r.lpush(&list, items).await.unwrap();
    }
    let bridge = format!("broker = \"{url}\"\nqueue = \"{list}\"\nprocessing = \"{processing}\"\n");
    let conn = r.clone();
    drill(
        &bridge,
        || {
            let mut c = conn.clone();
            let (l, p) = (list.clone(), processing.clone());
            async move {
                let a: usize = c.llen(&l).await.unwrap();
                let b: usize = c.llen(&p).await.unwrap();
                a + b
            }
        },
        Duration::ZERO,
    )
    .await;
    let _: () = r.del(&[&list, &processing]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_sigkill_between_commit_and_ack_loses_and_doubles_nothing() {
    use async_nats::jetstream::{self, stream};
    let Some(url) = server("BACKSTOP_TEST_NATS_URL") else {
        return;
    };
    let name = format!("BACKSTOP_CRASH_{}", uuid::Uuid::now_v7().simple());
    let subject = format!("backstop-test.crash.{}", uuid::Uuid::now_v7().simple());
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    js.create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![subject.clone()],
        ..Default::default()
    })
    .await
    .unwrap();
    let mut acks = Vec::new();
    for i in 0..MESSAGES {
        acks.push(js.publish(subject.clone(), body(i).into()).await.unwrap());
        if acks.len() == 500 {
            for a in acks.drain(..) {
                a.await.unwrap();
            }
        }
    }
    for a in acks {
        a.await.unwrap();
    }
    // AckWait 2 s: what a kill leaves delivered and unacknowledged comes again soon.
    let bridge = format!(
        "broker = \"{url}\"\nstream = \"{name}\"\nconsumer = \"backstop\"\nack_wait = \"2s\"\n"
    );
    let left_js = js.clone();
    let stream_name = name.clone();
    drill(
        &bridge,
        || {
            let (js, name) = (left_js.clone(), stream_name.clone());
            async move {
                match js
                    .get_stream(&name)
                    .await
                    .unwrap()
                    .consumer_info("backstop")
                    .await
                {
                    Ok(i) => (i.num_pending + i.num_ack_pending as u64) as usize,
                    Err(_) => MESSAGES,
                }
            }
        },
        Duration::ZERO,
    )
    .await;
    let _ = js.delete_stream(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_sigkill_between_commit_and_offset_commit_loses_and_doubles_nothing() {
    use rdkafka::ClientConfig;
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    let Some(url) = server("BACKSTOP_TEST_KAFKA_URL") else {
        return;
    };
    let servers = url.trim_start_matches("kafka://").to_string();
    // Left on the broker afterwards: deleting a topic on the test broker (Tansu 0.6) crashes
    // the librdkafka consumers running at the time.
    let topic = format!("backstop-test-crash-{}", uuid::Uuid::now_v7().simple());
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &servers)
        .create()
        .unwrap();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin
        .create_topics(
            [&NewTopic::new(&topic, 2, TopicReplication::Fixed(1))],
            &options,
        )
        .await
        .unwrap()
    {
        r.unwrap();
    }
    let producer = backstop_brokers::publisher(&backstop_core::broker::BrokerTarget {
        broker: backstop_core::broker::BrokerUrl::new(&url),
        destination: backstop_core::broker::Destination::KafkaTopic {
            topic: topic.clone(),
        },
    });
    let records: Vec<(String, String)> =
        (0..MESSAGES).map(|i| (format!("O-{i}"), body(i))).collect();
    for chunk in records.chunks(1000) {
        let sent = futures_util::future::join_all(chunk.iter().map(|(k, b)| {
            producer.publish(
                backstop_brokers::Outgoing {
                    id: k,
                    kind: "producer",
                    key: k,
                    attempt: 1,
                    traceparent: None,
                    body: b.as_bytes(),
                    since_enqueued: std::time::Duration::ZERO,
                },
                Duration::from_secs(30),
            )
        }))
        .await;
        assert!(
            sent.iter()
                .all(|s| *s == backstop_brokers::Published::Confirmed)
        );
    }
    drop(producer);
    let bridge = format!("broker = \"{url}\"\ntopic = \"{topic}\"\ngroup = \"{topic}\"\n");
    // What the group has not committed yet: the lag, summed over the partitions.
    let lag = || {
        let (servers, topic) = (servers.clone(), topic.clone());
        async move {
            tokio::task::spawn_blocking(move || {
                let c: BaseConsumer = ClientConfig::new()
                    .set("bootstrap.servers", &servers)
                    .set("group.id", &topic)
                    .create()
                    .unwrap();
                let mut list = rdkafka::TopicPartitionList::new();
                list.add_partition_range(&topic, 0, 1);
                let committed = c.committed_offsets(list, Duration::from_secs(10)).unwrap();
                (0..2)
                    .map(|p| {
                        let end = c
                            .fetch_watermarks(&topic, p, Duration::from_secs(10))
                            .unwrap()
                            .1;
                        let at = match committed.find_partition(&topic, p).map(|e| e.offset()) {
                            Some(rdkafka::Offset::Offset(o)) => o,
                            _ => 0,
                        };
                        (end - at) as usize
                    })
                    .sum::<usize>()
            })
            .await
            .unwrap()
        }
    };
    // Past the killed members' 10 s sessions: the test broker (Tansu 0.6.0) may give a member
    // that replaces a killed one before then an empty assignment and never rebalance it.
    drill(&bridge, lag, Duration::from_secs(12)).await;
}
