//! Bridges and broker targets through a real engine on SQLite and a real RabbitMQ
//! (`BACKSTOP_TEST_AMQP_URL`, e.g. `amqp://guest:guest@127.0.0.1:5672/%2f`); skipped with a
//! visible line without one.

use backstop_core::broker::{
    AmqpQueue, BridgeConfig, BridgeSource, BrokerTarget, BrokerUrl, Destination, KeySource,
};
use backstop_core::store::{CountsParams, GetByKeyParams, ListParams, TimelineParams};
use backstop_core::{EventType, KindConfig, Status, Target};
use backstop_engine::{Engine, EnqueueRequest, ManualRequest};
mod brokers;
use brokers::{Running, options, server, store, unique, until};
use lapin::options::{
    BasicGetOptions, BasicPublishOptions, BasicRejectOptions, ConfirmSelectOptions,
    ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use std::time::{Duration, Instant};

async fn channel(url: &str) -> (Connection, Channel) {
    let c = Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = c.create_channel().await.unwrap();
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    (c, ch)
}

async fn publish(ch: &Channel, exchange: &str, routing_key: &str, body: &[u8]) {
    ch.basic_publish(
        ShortString::from(exchange),
        ShortString::from(routing_key),
        BasicPublishOptions::default(),
        body,
        BasicProperties::default().with_delivery_mode(2),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

async fn depth(ch: &Channel, queue: &str) -> u32 {
    ch.queue_declare(
        ShortString::from(queue),
        QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap()
    .message_count()
}

async fn declare_exchange(ch: &Channel, name: &str, kind: ExchangeKind) {
    ch.exchange_declare(
        ShortString::from(name),
        kind,
        ExchangeDeclareOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
}

/// A durable queue with `args`.
async fn declare_queue(ch: &Channel, name: &str, args: FieldTable) {
    ch.queue_declare(
        ShortString::from(name),
        QueueDeclareOptions::durable(),
        args,
    )
    .await
    .unwrap();
}

async fn bind(ch: &Channel, queue: &str, exchange: &str, routing_key: &str) {
    ch.queue_bind(
        ShortString::from(queue),
        ShortString::from(exchange),
        ShortString::from(routing_key),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
}

async fn delete_queue(ch: &Channel, queue: &str) {
    let _ = ch
        .queue_delete(ShortString::from(queue), QueueDeleteOptions::default())
        .await;
}

fn bridge(name: &str, url: &str, queue: &str, kind: &str) -> BridgeConfig {
    BridgeConfig {
        name: name.into(),
        broker: BrokerUrl::new(url),
        source: BridgeSource::AmqpQueue(AmqpQueue {
            queue: queue.into(),
            queue_type: None,
            durable: true,
            dead_letter_exchange: None,
            declare: true,
        }),
        kind: kind.into(),
        key: KeySource::Pointer("/order_id".into()),
        prefetch: 64,
        dead_letters: false,
        max_message: 256,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_become_tasks_once_and_are_acked_after_their_commit() {
    let Some(url) = server("BACKSTOP_TEST_AMQP_URL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let q = unique("backstop.test.bridge");
    let (_c, ch) = channel(&url).await;
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new("sms.send", Target::Pull))
        .bridge(bridge("sms-in", &url, &q, "sms.send"))
        .options(options())
        .build()
        .unwrap();
    let run = Running::start(&engine);
    until(&engine, "connected", |v| v[0].connected).await;
    for i in 0..300 {
        publish(
            &ch,
            "",
            &q,
            format!(r#"{{"order_id":"A-{i}","to":"+86"}}"#).as_bytes(),
        )
        .await;
    }
    // The same business messages again (a producer's retry): deduplicated, counted, on the timeline.
    for i in 0..10 {
        publish(
            &ch,
            "",
            &q,
            format!(r#"{{"order_id":"A-{i}","to":"+86"}}"#).as_bytes(),
        )
        .await;
    }
    let v = until(&engine, "310 settled", |v| {
        v[0].inserted + v[0].deduplicated == 310
    })
    .await;
    assert_eq!(
        (
            v.received,
            v.inserted,
            v.deduplicated,
            v.rejected,
            v.in_flight
        ),
        (310, 300, 10, 0, 0)
    );
    assert!(v.balanced);
    let counts = store
        .counts(CountsParams {
            kind: Some("sms.send".into()),
        })
        .await
        .unwrap();
    assert_eq!(counts.pending, 300);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(depth(&ch, &q).await, 0, "every message acknowledged");
    let t = store
        .get_by_key(GetByKeyParams {
            kind: "sms.send".into(),
            key: "A-3".into(),
        })
        .await
        .unwrap()
        .unwrap();
    let tl = store.timeline(TimelineParams { id: t.id }).await.unwrap();
    assert_eq!(tl[0].kind, EventType::Created);
    assert_eq!(tl[0].origin.as_ref().unwrap()["queue"], q.as_str());
    assert_eq!(
        tl.iter()
            .filter(|e| e.kind == EventType::Redelivered)
            .count(),
        1,
        "the repeat is on the timeline: {tl:?}"
    );
    run.stop().await;
    delete_queue(&ch, &q).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_that_cannot_be_tasks_are_failed_records_and_acked() {
    let Some(url) = server("BACKSTOP_TEST_AMQP_URL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let q = unique("backstop.test.rejects");
    let (_c, ch) = channel(&url).await;
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new("sms.send", Target::Pull))
        .bridge(bridge("sms-in", &url, &q, "sms.send"))
        .options(options())
        .build()
        .unwrap();
    let run = Running::start(&engine);
    until(&engine, "connected", |v| v[0].connected).await;
    publish(&ch, "", &q, br#"{"to":"+86"}"#).await; // no key
    publish(&ch, "", &q, b"not json at all").await; // not JSON
    publish(
        &ch,
        "",
        &q,
        format!(r#"{{"order_id":"big","pad":"{}"}}"#, "x".repeat(300)).as_bytes(),
    )
    .await; // over 256 bytes
    publish(&ch, "", &q, br#"{"order_id":"C-1","v":1}"#).await;
    publish(&ch, "", &q, br#"{"order_id":"C-1","v":2}"#).await; // same key, other payload
    let v = until(&engine, "5 settled", |v| v[0].inserted + v[0].rejected == 5).await;
    assert_eq!(
        (v.received, v.inserted, v.deduplicated, v.rejected),
        (5, 1, 0, 4)
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        depth(&ch, &q).await,
        0,
        "rejects are acknowledged once recorded"
    );
    let dead = store
        .list(ListParams {
            kind: Some("backstop.rejected.sms-in".into()),
            status: Some(Status::Failed),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(dead.len(), 4, "{dead:?}");
    let reasons: Vec<String> = dead.iter().filter_map(|t| t.reason.clone()).collect();
    for want in [
        "no string or number at /order_id",
        "not JSON",
        "over the limit of 256",
        "different payload",
    ] {
        assert!(
            reasons.iter().any(|r| r.contains(want)),
            "{want:?} in {reasons:?}"
        );
    }
    let raw = dead
        .iter()
        .find(|t| t.reason.as_deref().is_some_and(|r| r.contains("not JSON")))
        .unwrap();
    let p: serde_json::Value = serde_json::from_slice(&raw.payload).unwrap();
    assert_eq!(p["body_text"], "not json at all");
    run.stop().await;
    delete_queue(&ch, &q).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_a_rabbitmq_kind_are_published_with_their_id_and_succeed_on_confirm() {
    let Some(url) = server("BACKSTOP_TEST_AMQP_URL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let (_c, ch) = channel(&url).await;
    let ex = unique("backstop.test.orders");
    let q = unique("backstop.test.orders.q");
    declare_exchange(&ch, &ex, ExchangeKind::Topic).await;
    declare_queue(&ch, &q, FieldTable::default()).await;
    bind(&ch, &q, &ex, "order.*").await;
    let target = |routing_key: &str| {
        Target::Broker(BrokerTarget {
            broker: BrokerUrl::new(url.clone()),
            destination: Destination::Exchange {
                exchange: ex.clone(),
                routing_key: routing_key.into(),
            },
        })
    };
    let mut unroutable = KindConfig::new("order.lost", target("nobody.listens"));
    unroutable.max_attempts = 2;
    unroutable.retry = backstop_core::RetryPolicy::Schedule(vec![Duration::from_millis(50)]);
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new("order.created", target("order.created")))
        .kind(unroutable)
        .options(options())
        .build()
        .unwrap();
    let run = Running::start(&engine);
    let mut ids = Vec::new();
    for i in 0..100 {
        let r = engine
            .enqueue(EnqueueRequest {
                kind: "order.created".into(),
                key: format!("O-{i}"),
                payload: format!(r#"{{"order":{i}}}"#).into_bytes(),
                ..Default::default()
            })
            .await
            .unwrap();
        ids.push(r.id.to_string());
    }
    engine
        .enqueue(EnqueueRequest {
            kind: "order.lost".into(),
            key: "L-1".into(),
            payload: b"{}".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let done = store
            .counts(CountsParams {
                kind: Some("order.created".into()),
            })
            .await
            .unwrap();
        let lost = store
            .counts(CountsParams {
                kind: Some("order.lost".into()),
            })
            .await
            .unwrap();
        if done.succeeded == 100 && lost.failed == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "{done:?} {lost:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run.stop().await;
    // Every published message carries its task's id; the broker holds each at least once.
    let mut seen = Vec::new();
    while let Some(m) = ch
        .basic_get(
            ShortString::from(q.as_str()),
            BasicGetOptions { no_ack: true },
        )
        .await
        .unwrap()
    {
        seen.push(
            m.delivery
                .properties
                .message_id()
                .as_ref()
                .unwrap()
                .to_string(),
        );
    }
    seen.sort();
    seen.dedup();
    ids.sort();
    assert_eq!(seen, ids);
    let lost = store
        .get_by_key(GetByKeyParams {
            kind: "order.lost".into(),
            key: "L-1".into(),
        })
        .await
        .unwrap()
        .unwrap();
    assert!(
        lost.last_error
            .as_deref()
            .unwrap_or("")
            .contains("unroutable"),
        "{lost:?}"
    );
    delete_queue(&ch, &q).await;
    let _ = ch
        .exchange_delete(ShortString::from(ex.as_str()), Default::default())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_queue_becomes_failed_tasks_that_a_retry_publishes_back() {
    let Some(url) = server("BACKSTOP_TEST_AMQP_URL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let (_c, ch) = channel(&url).await;
    // The setup PHP teams have: work queue → DLX → dead queue.
    let work = unique("backstop.test.work");
    let dlx = unique("backstop.test.dlx");
    let dead = unique("backstop.test.dead");
    declare_exchange(&ch, &dlx, ExchangeKind::Fanout).await;
    declare_queue(&ch, &dead, FieldTable::default()).await;
    bind(&ch, &dead, &dlx, "").await;
    let mut args = FieldTable::default();
    args.insert(
        ShortString::from("x-dead-letter-exchange"),
        AMQPValue::LongString(LongString::from(dlx.as_str())),
    );
    declare_queue(&ch, &work, args).await;
    publish(&ch, "", &work, br#"{"order_id":"D-1","to":"+86"}"#).await;
    // A worker gives up on it: reject without requeue, and the broker dead-letters it.
    let m = ch
        .basic_get(ShortString::from(work.as_str()), BasicGetOptions::default())
        .await
        .unwrap()
        .unwrap();
    m.delivery
        .acker
        .reject(BasicRejectOptions { requeue: false })
        .await
        .unwrap();
    let mut intake = bridge("sms-dead", &url, &dead, "sms.send");
    intake.dead_letters = true;
    // A retry publishes it back to the work queue through the kind's target.
    let kind = KindConfig::new(
        "sms.send",
        Target::Broker(BrokerTarget {
            broker: BrokerUrl::new(url.clone()),
            destination: Destination::Exchange {
                exchange: String::new(),
                routing_key: work.clone(),
            },
        }),
    );
    let engine = Engine::builder(store.clone())
        .kind(kind)
        .bridge(intake)
        .options(options())
        .build()
        .unwrap();
    let run = Running::start(&engine);
    until(&engine, "the dead letter taken in", |v| v[0].inserted == 1).await;
    let t = store
        .get_by_key(GetByKeyParams {
            kind: "sms.send".into(),
            key: "D-1".into(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.status, Status::Failed);
    assert_eq!(t.attempts, 0);
    let reason = t.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("rejected") && reason.contains(&work),
        "{reason}"
    );
    let tl = store.timeline(TimelineParams { id: t.id }).await.unwrap();
    assert!(
        tl[0].origin.as_ref().unwrap().get("x-death").is_some(),
        "{tl:?}"
    );
    engine
        .retry(ManualRequest {
            id: t.id,
            actor: "test".into(),
            reason: Some("fixed the number".into()),
        })
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while store
        .get_by_key(GetByKeyParams {
            kind: "sms.send".into(),
            key: "D-1".into(),
        })
        .await
        .unwrap()
        .unwrap()
        .status
        != Status::Succeeded
    {
        assert!(Instant::now() < deadline, "the retry was never published");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run.stop().await;
    let back = ch
        .basic_get(
            ShortString::from(work.as_str()),
            BasicGetOptions { no_ack: true },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.delivery.data, br#"{"order_id":"D-1","to":"+86"}"#);
    assert_eq!(
        back.delivery
            .properties
            .message_id()
            .as_ref()
            .unwrap()
            .as_str(),
        t.id.to_string()
    );
    for q in [&work, &dead] {
        delete_queue(&ch, q).await;
    }
    let _ = ch
        .exchange_delete(ShortString::from(dlx.as_str()), Default::default())
        .await;
}
