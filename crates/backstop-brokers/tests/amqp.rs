//! The RabbitMQ consumer and publisher against a real broker (`BACKSTOP_TEST_AMQP_URL`, e.g.
//! `amqp://guest:guest@127.0.0.1:5672/%2f`); skipped with a visible line without one.

use backstop_brokers::{BrokerError, Outgoing, Published, connect_consumer, publisher};
use backstop_core::broker::{
    AmqpQueue, BridgeConfig, BridgeSource, BrokerTarget, BrokerUrl, Destination, KeySource,
};
use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use std::time::Duration;

const VAR: &str = "BACKSTOP_TEST_AMQP_URL";

fn url() -> Option<String> {
    match std::env::var(VAR).ok().filter(|u| !u.is_empty()) {
        Some(u) => Some(u),
        None => {
            eprintln!("skipped: {VAR} is not set");
            None
        }
    }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}.{}", uuid::Uuid::now_v7().simple())
}

async fn raw_channel(url: &str) -> (Connection, Channel) {
    let c = Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = c.create_channel().await.unwrap();
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    (c, ch)
}

fn queue(name: &str) -> AmqpQueue {
    AmqpQueue {
        queue: name.into(),
        queue_type: None,
        durable: true,
        dead_letter_exchange: None,
        declare: true,
    }
}

fn bridge(url: &str, q: AmqpQueue) -> BridgeConfig {
    BridgeConfig {
        name: "t".into(),
        broker: BrokerUrl::new(url),
        source: BridgeSource::AmqpQueue(q),
        kind: "k".into(),
        key: KeySource::MessageId,
        prefetch: 64,
        dead_letters: false,
        max_message: 1 << 20,
    }
}

async fn publish_raw(ch: &Channel, queue: &str, id: &str, body: &[u8], headers: FieldTable) {
    ch.basic_publish(
        ShortString::from(""),
        ShortString::from(queue),
        BasicPublishOptions::default(),
        body,
        BasicProperties::default()
            .with_message_id(ShortString::from(id))
            .with_headers(headers),
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

async fn delete(ch: &Channel, queue: &str) {
    let _ = ch
        .queue_delete(ShortString::from(queue), QueueDeleteOptions::default())
        .await;
}

#[tokio::test]
async fn messages_arrive_in_order_with_their_metadata_and_only_acks_remove_them() {
    let Some(url) = url() else { return };
    let q = unique("backstop.test.consume");
    let mut c = connect_consumer(&bridge(&url, queue(&q))).await.unwrap();
    let (_conn, ch) = raw_channel(&url).await;
    for i in 0..3 {
        let mut h = FieldTable::default();
        h.insert(
            ShortString::from("traceparent"),
            AMQPValue::LongString(LongString::from(format!("00-{i:032}-{i:016}-01"))),
        );
        publish_raw(
            &ch,
            &q,
            &format!("m{i}"),
            format!("{{\"n\":{i}}}").as_bytes(),
            h,
        )
        .await;
    }
    let mut got = Vec::new();
    while got.len() < 3 {
        got.extend(c.next_batch(64).await.unwrap());
    }
    let ids: Vec<_> = got.iter().map(|m| m.message_id.clone().unwrap()).collect();
    assert_eq!(ids, ["m0", "m1", "m2"]);
    assert_eq!(got[1].body, br#"{"n":1}"#);
    assert_eq!(
        got[2].headers["traceparent"],
        format!("00-{:032}-{:016}-01", 2, 2)
    );
    assert_eq!(got[0].origin["queue"], q.as_str());
    assert_eq!(got[0].origin["redelivered"], false);
    // Only the first is acknowledged; the other two come back to the next consumer.
    c.ack(vec![got[0].token]).await.unwrap();
    drop(c);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        depth(&ch, &q).await,
        2,
        "unacknowledged deliveries are requeued"
    );
    let mut again = connect_consumer(&bridge(&url, queue(&q))).await.unwrap();
    let mut back = Vec::new();
    while back.len() < 2 {
        back.extend(again.next_batch(64).await.unwrap());
    }
    let ids: Vec<_> = back.iter().map(|m| m.message_id.clone().unwrap()).collect();
    assert_eq!(ids, ["m1", "m2"]);
    assert!(back.iter().all(|m| m.origin["redelivered"] == true));
    again
        .ack(back.iter().map(|m| m.token).collect())
        .await
        .unwrap();
    drop(again);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(depth(&ch, &q).await, 0, "acknowledged deliveries are gone");
    delete(&ch, &q).await;
}

#[tokio::test]
async fn a_batch_takes_what_is_waiting_up_to_its_limit() {
    let Some(url) = url() else { return };
    let q = unique("backstop.test.batch");
    let (_conn, ch) = raw_channel(&url).await;
    let mut c = connect_consumer(&bridge(&url, queue(&q))).await.unwrap();
    for i in 0..200 {
        publish_raw(&ch, &q, &format!("m{i}"), b"{}", FieldTable::default()).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let batch = c.next_batch(32).await.unwrap();
    assert_eq!(batch.len(), 32, "a full batch when more are waiting");
    delete(&ch, &q).await;
}

#[tokio::test]
async fn a_queue_declared_otherwise_is_refused_naming_the_argument() {
    let Some(url) = url() else { return };
    let q = unique("backstop.test.conflict");
    let (_conn, ch) = raw_channel(&url).await;
    let mut args = FieldTable::default();
    args.insert(
        ShortString::from("x-queue-type"),
        AMQPValue::LongString(LongString::from("classic")),
    );
    ch.queue_declare(
        ShortString::from(q.as_str()),
        QueueDeclareOptions::durable(),
        args,
    )
    .await
    .unwrap();
    let mut want = queue(&q);
    want.queue_type = Some("quorum".into());
    let err = match connect_consumer(&bridge(&url, want)).await {
        Err(e) => e,
        Ok(_) => panic!("a conflicting declaration must fail"),
    };
    assert!(matches!(err, BrokerError::Config(_)), "{err:?}");
    assert!(err.to_string().contains("x-queue-type"), "{err}");
    // Checking only (declare = false) a queue that does not exist is refused too.
    let mut missing = queue(&unique("backstop.test.missing"));
    missing.declare = false;
    let err = match connect_consumer(&bridge(&url, missing)).await {
        Err(e) => e,
        Ok(_) => panic!("a missing queue must fail"),
    };
    assert!(matches!(err, BrokerError::Config(_)), "{err:?}");
    delete(&ch, &q).await;
}

#[tokio::test]
async fn a_quorum_queue_is_declared_and_consumed() {
    let Some(url) = url() else { return };
    let q = unique("backstop.test.quorum");
    let mut want = queue(&q);
    want.queue_type = Some("quorum".into());
    let mut c = connect_consumer(&bridge(&url, want)).await.unwrap();
    let (_conn, ch) = raw_channel(&url).await;
    publish_raw(&ch, &q, "q1", b"{}", FieldTable::default()).await;
    let got = c.next_batch(8).await.unwrap();
    assert_eq!(got[0].message_id.as_deref(), Some("q1"));
    delete(&ch, &q).await;
}

fn out<'a>(id: &'a str, body: &'a [u8]) -> Outgoing<'a> {
    Outgoing {
        id,
        kind: "order.created",
        key: "A-1",
        attempt: 1,
        traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        body,
        since_enqueued: std::time::Duration::ZERO,
    }
}

fn target(url: &str, exchange: &str, routing_key: &str) -> BrokerTarget {
    BrokerTarget {
        broker: BrokerUrl::new(url),
        destination: Destination::Exchange {
            exchange: exchange.into(),
            routing_key: routing_key.into(),
        },
    }
}

#[tokio::test]
async fn a_publish_is_confirmed_and_carries_the_task_id() {
    let Some(url) = url() else { return };
    let q = unique("backstop.test.publish");
    let (_conn, ch) = raw_channel(&url).await;
    ch.queue_declare(
        ShortString::from(q.as_str()),
        QueueDeclareOptions::durable(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let p = publisher(&target(&url, "", &q));
    let r = p
        .publish(out("task-1", b"{\"a\":1}"), Duration::from_secs(5))
        .await;
    assert_eq!(r, Published::Confirmed);
    let mut c = connect_consumer(&bridge(&url, queue(&q))).await.unwrap();
    let got = c.next_batch(8).await.unwrap();
    assert_eq!(got[0].message_id.as_deref(), Some("task-1"));
    assert_eq!(got[0].headers["backstop-task-id"], "task-1");
    assert_eq!(got[0].headers["backstop-key"], "A-1");
    assert!(got[0].headers["traceparent"].starts_with("00-0af7"));
    assert_eq!(got[0].body, b"{\"a\":1}");
    delete(&ch, &q).await;
}

#[tokio::test]
async fn unroutable_missing_and_unreachable_are_failures_with_the_brokers_text() {
    let Some(url) = url() else { return };
    let t = Duration::from_secs(5);
    // Routed nowhere: RabbitMQ returns it, then acks; that is no success.
    let ex = unique("backstop.test.ex");
    let (_conn, ch) = raw_channel(&url).await;
    ch.exchange_declare(
        ShortString::from(ex.as_str()),
        ExchangeKind::Direct,
        ExchangeDeclareOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let p = publisher(&target(&url, &ex, "nobody.listens"));
    match p.publish(out("t-unroutable", b"{}"), t).await {
        Published::Transient(e) => assert!(e.contains("unroutable") && e.contains("312"), "{e}"),
        other => panic!("unroutable must not succeed: {other:?}"),
    }
    // A missing exchange: permanent, with the broker's words; the next publish reconnects.
    let p = publisher(&target(&url, &unique("backstop.test.no-such"), "x"));
    match p.publish(out("t-missing", b"{}"), t).await {
        Published::Permanent(e) => {
            assert!(e.contains("NOT_FOUND") || e.contains("no exchange"), "{e}")
        }
        other => panic!("a missing exchange is permanent: {other:?}"),
    }
    match p.publish(out("t-missing-2", b"{}"), t).await {
        Published::Permanent(_) => {}
        other => panic!("still permanent after reconnecting: {other:?}"),
    }
    // Nothing listening: transient, within the timeout.
    let p = publisher(&target("amqp://guest:guest@127.0.0.1:1/%2f", "", "q"));
    let started = std::time::Instant::now();
    match p
        .publish(out("t-down", b"{}"), Duration::from_secs(3))
        .await
    {
        Published::Transient(e) => assert!(!e.contains("guest:guest"), "no password in {e}"),
        other => panic!("an unreachable broker is transient: {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(4));
    let _ = ch
        .exchange_delete(ShortString::from(ex.as_str()), Default::default())
        .await;
}

#[tokio::test]
async fn concurrent_publishes_each_get_their_own_confirm_with_nacks_in_the_middle() {
    let Some(url) = url() else { return };
    // A queue that takes 5 and refuses the rest (reject-publish makes the broker nack them):
    // of 40 pipelined publishes, exactly the 5 stored are confirmed, whatever order the
    // (possibly `multiple`) confirms arrive in.
    let q = unique("backstop.test.nack");
    let (_conn, ch) = raw_channel(&url).await;
    let mut args = FieldTable::default();
    args.insert(ShortString::from("x-max-length"), AMQPValue::LongInt(5));
    args.insert(
        ShortString::from("x-overflow"),
        AMQPValue::LongString(LongString::from("reject-publish")),
    );
    ch.queue_declare(
        ShortString::from(q.as_str()),
        QueueDeclareOptions::durable(),
        args,
    )
    .await
    .unwrap();
    let p = publisher(&target(&url, "", &q));
    let ids: Vec<String> = (0..40).map(|i| format!("n{i}")).collect();
    let results = futures_util::future::join_all(
        ids.iter()
            .map(|id| p.publish(out(id, b"{}"), Duration::from_secs(10))),
    )
    .await;
    let confirmed: Vec<&String> = ids
        .iter()
        .zip(&results)
        .filter(|(_, r)| **r == Published::Confirmed)
        .map(|(id, _)| id)
        .collect();
    assert_eq!(confirmed.len(), 5, "{results:?}");
    assert!(
        results.iter().all(|r| *r == Published::Confirmed
            || matches!(r, Published::Transient(e) if e.contains("nack"))),
        "{results:?}"
    );
    // The confirmed ones are exactly the ones in the queue.
    let mut want = queue(&q);
    want.declare = false;
    let mut c = connect_consumer(&bridge(&url, want)).await.unwrap();
    let mut stored = Vec::new();
    while stored.len() < 5 {
        stored.extend(c.next_batch(8).await.unwrap());
    }
    let mut stored: Vec<String> = stored.into_iter().filter_map(|m| m.message_id).collect();
    stored.sort();
    let mut confirmed: Vec<String> = confirmed.into_iter().cloned().collect();
    confirmed.sort();
    assert_eq!(stored, confirmed);
    delete(&ch, &q).await;
}

#[tokio::test]
async fn many_pipelined_publishes_are_all_confirmed_and_all_there() {
    let Some(url) = url() else { return };
    let q = unique("backstop.test.pipeline");
    let (_conn, ch) = raw_channel(&url).await;
    ch.queue_declare(
        ShortString::from(q.as_str()),
        QueueDeclareOptions::durable(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let ex = unique("backstop.test.fanout");
    ch.exchange_declare(
        ShortString::from(ex.as_str()),
        ExchangeKind::Fanout,
        ExchangeDeclareOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    ch.queue_bind(
        ShortString::from(q.as_str()),
        ShortString::from(ex.as_str()),
        ShortString::from(""),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let p = publisher(&target(&url, &ex, ""));
    let ids: Vec<String> = (0..500).map(|i| format!("p{i}")).collect();
    let results = futures_util::future::join_all(
        ids.iter()
            .map(|id| p.publish(out(id, b"{}"), Duration::from_secs(10))),
    )
    .await;
    assert!(results.iter().all(|r| *r == Published::Confirmed));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(depth(&ch, &q).await, 500);
    delete(&ch, &q).await;
    let _ = ch
        .exchange_delete(ShortString::from(ex.as_str()), Default::default())
        .await;
}
