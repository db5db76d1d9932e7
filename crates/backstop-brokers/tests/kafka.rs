//! The Kafka clients against a real Kafka-protocol broker (`BACKSTOP_TEST_KAFKA_URL`, Tansu
//! in this repo's CI): records with their keys, headers and origin; commits only past what
//! is acknowledged with everything before it; the idempotent producer's records as a plain
//! consumer reads them; connect errors; a rebalance between two group members.

mod kafka_common;

use backstop_brokers::{BrokerError, Outgoing, Published, Received, connect_consumer, publisher};
use backstop_core::broker::{BrokerTarget, BrokerUrl, Destination};
use futures_util::future::join_all;
use kafka_common::{
    Topic, batch, bridge, close, committed, high_watermarks, nothing_within, produce, producer,
    raw_consumer, receive, unique, url,
};
use rdkafka::consumer::Consumer as _;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn int(m: &Received, field: &str) -> i64 {
    m.origin[field].as_i64().unwrap()
}

fn headers(task: &str) -> OwnedHeaders {
    OwnedHeaders::new()
        .insert(Header {
            key: "backstop-task-id",
            value: Some(task),
        })
        .insert(Header {
            key: "traceparent",
            value: Some(TRACEPARENT),
        })
        .insert(Header {
            key: "raw",
            value: Some(&[b'a', 0xff][..]),
        })
}

#[tokio::test]
async fn records_arrive_with_key_headers_and_origin_and_acks_commit_to_the_high_watermark() {
    let Some(url) = url() else { return };
    let topic = Topic::new(&url, 2).await;
    let group = unique("group");
    let p = producer(&url);
    let n = 20;
    for i in 0..n {
        let body = format!("body-{i}");
        let key = format!("order-{i}");
        produce(
            &p,
            &topic.name,
            Some(i % 2),
            &key,
            body.as_bytes(),
            headers(&format!("task-{i}")),
        )
        .await;
    }
    let mut c = connect_consumer(&bridge(&url, &topic.name, &group))
        .await
        .unwrap();
    let got = receive(&mut c, n as usize).await;
    let mut by_body: BTreeMap<String, &Received> = BTreeMap::new();
    for m in &got {
        by_body.insert(String::from_utf8(m.body.clone()).unwrap(), m);
    }
    assert_eq!(by_body.len(), n as usize, "each record once");
    for i in 0..n {
        let m = by_body[&format!("body-{i}")];
        assert_eq!(
            m.message_key.as_deref(),
            Some(format!("order-{i}").as_bytes())
        );
        assert_eq!(m.message_id.as_deref(), Some(format!("task-{i}").as_str()));
        assert_eq!(m.headers["traceparent"], TRACEPARENT);
        assert_eq!(m.headers["raw"], "a\u{fffd}", "headers as lossy UTF-8");
        assert_eq!(m.origin["broker"], "kafka");
        assert_eq!(m.origin["topic"], topic.name.as_str());
        assert_eq!(int(m, "partition"), i64::from(i % 2));
        assert_eq!(int(m, "offset"), i64::from(i / 2));
        assert!(int(m, "timestamp") > 0, "{:?}", m.origin);
        assert_eq!(m.origin["traceparent"], TRACEPARENT);
        assert!(m.death.is_none() && m.poison.is_none());
    }
    // In reverse: the order of acks does not matter.
    c.ack(got.iter().rev().map(|m| m.token).collect())
        .await
        .unwrap();
    assert_eq!(
        committed(&url, &group, &topic.name, 2).await,
        high_watermarks(&url, &topic.name, 2)
            .await
            .into_iter()
            .map(Some)
            .collect::<Vec<_>>()
    );
    close(c).await;

    // A new member of the group starts past everything: the first thing it gets is new.
    let mut again = connect_consumer(&bridge(&url, &topic.name, &group))
        .await
        .unwrap();
    produce(&p, &topic.name, Some(1), "k", b"after", OwnedHeaders::new()).await;
    let next = batch(&mut again, 100).await;
    assert_eq!(next.len(), 1, "nothing acknowledged comes back");
    assert_eq!(next[0].body, b"after");
    close(again).await;
}

#[tokio::test]
async fn an_absent_payload_is_an_empty_body_and_an_absent_key_is_none() {
    let Some(url) = url() else { return };
    let topic = Topic::new(&url, 1).await;
    let p = producer(&url);
    let record = rdkafka::producer::FutureRecord::<(), ()>::to(&topic.name);
    p.send(record, Duration::from_secs(10)).await.unwrap();
    let mut c = connect_consumer(&bridge(&url, &topic.name, &unique("group")))
        .await
        .unwrap();
    let got = batch(&mut c, 10).await;
    assert_eq!(got.len(), 1);
    assert!(got[0].body.is_empty());
    assert_eq!(got[0].message_key, None);
    assert_eq!(got[0].message_id, None);
    assert!(got[0].headers.is_empty());
    close(c).await;
}

#[tokio::test]
async fn no_commit_passes_an_unacknowledged_record() {
    let Some(url) = url() else { return };
    let topic = Topic::new(&url, 1).await;
    let group = unique("group");
    let p = producer(&url);
    for i in 0..10 {
        produce(
            &p,
            &topic.name,
            Some(0),
            "k",
            format!("{i}").as_bytes(),
            OwnedHeaders::new(),
        )
        .await;
    }
    let mut c = connect_consumer(&bridge(&url, &topic.name, &group))
        .await
        .unwrap();
    let got = receive(&mut c, 10).await;
    let offsets: Vec<i64> = got.iter().map(|m| int(m, "offset")).collect();
    assert_eq!(offsets, (0..10).collect::<Vec<_>>());
    // 6-9 first, then 0-4: offset 5 is never acknowledged.
    let tokens = |r: std::ops::Range<usize>| got[r].iter().map(|m| m.token).collect::<Vec<_>>();
    c.ack(tokens(6..10)).await.unwrap();
    assert_eq!(committed(&url, &group, &topic.name, 1).await, [None]);
    c.ack(tokens(0..5)).await.unwrap();
    assert_eq!(committed(&url, &group, &topic.name, 1).await, [Some(5)]);
    close(c).await;

    let mut again = connect_consumer(&bridge(&url, &topic.name, &group))
        .await
        .unwrap();
    let reread = receive(&mut again, 5).await;
    let offsets: Vec<i64> = reread.iter().map(|m| int(m, "offset")).collect();
    assert_eq!(
        offsets,
        [5, 6, 7, 8, 9],
        "read again from the unacknowledged one"
    );
    again
        .ack(reread.iter().map(|m| m.token).collect())
        .await
        .unwrap();
    assert_eq!(committed(&url, &group, &topic.name, 1).await, [Some(10)]);
    close(again).await;
}

fn to_topic(url: &str, topic: &str) -> BrokerTarget {
    BrokerTarget {
        broker: BrokerUrl::new(url),
        destination: Destination::KafkaTopic {
            topic: topic.into(),
        },
    }
}

fn task<'a>(id: &'a str, key: &'a str, body: &'a [u8]) -> Outgoing<'a> {
    Outgoing {
        id,
        kind: "sms.send",
        key,
        attempt: 2,
        traceparent: Some(TRACEPARENT),
        body,
        since_enqueued: std::time::Duration::ZERO,
    }
}

/// A record as a plain consumer reads it.
struct Raw {
    partition: i32,
    key: Option<Vec<u8>>,
    body: Vec<u8>,
    headers: BTreeMap<String, String>,
}

/// Every record of `topic` (of `partitions` partitions), read by a plain assigned consumer
/// until `n` have come.
async fn read_all(url: &str, topic: &str, partitions: i32, n: usize) -> Vec<Raw> {
    let (url, topic) = (url.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        let c = raw_consumer(&url, &unique("reader"));
        let mut list = TopicPartitionList::new();
        for p in 0..partitions {
            list.add_partition_offset(&topic, p, Offset::Beginning)
                .unwrap();
        }
        c.assign(&list).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut out = Vec::new();
        while out.len() < n && Instant::now() < deadline {
            let Some(m) = c.poll(Duration::from_millis(500)) else {
                continue;
            };
            let m = m.unwrap();
            let mut headers = BTreeMap::new();
            for h in m.headers().iter().flat_map(|hs| hs.iter()) {
                let v = String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned();
                headers.insert(h.key.to_string(), v);
            }
            out.push(Raw {
                partition: m.partition(),
                key: m.key().map(<[u8]>::to_vec),
                body: m.payload().unwrap_or_default().to_vec(),
                headers,
            });
        }
        out
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn published_tasks_carry_their_key_and_headers_and_one_key_stays_in_one_partition() {
    let Some(url) = url() else { return };
    let topic = Topic::new(&url, 3).await;
    let p = publisher(&to_topic(&url, &topic.name));
    let timeout = Duration::from_secs(10);
    assert_eq!(
        p.publish(task("t-1", "order-7", b"{\"n\":1}"), timeout)
            .await,
        Published::Confirmed
    );
    assert_eq!(
        p.publish(task("t-2", "order-7", b"{\"n\":2}"), timeout)
            .await,
        Published::Confirmed
    );
    let got = read_all(&url, &topic.name, 3, 2).await;
    assert_eq!(got.len(), 2);
    let first = got
        .iter()
        .find(|r| r.headers["backstop-task-id"] == "t-1")
        .unwrap();
    assert_eq!(first.key.as_deref(), Some(&b"order-7"[..]));
    assert_eq!(first.body, b"{\"n\":1}");
    assert_eq!(first.headers["backstop-kind"], "sms.send");
    assert_eq!(first.headers["backstop-key"], "order-7");
    assert_eq!(first.headers["backstop-attempt"], "2");
    assert_eq!(first.headers["traceparent"], TRACEPARENT);
    assert_eq!(got[0].partition, got[1].partition, "one key, one partition");
}

#[tokio::test]
async fn two_thousand_concurrent_publishes_are_all_confirmed_and_all_readable() {
    let Some(url) = url() else { return };
    let topic = Topic::new(&url, 3).await;
    let p = publisher(&to_topic(&url, &topic.name));
    let ids: Vec<String> = (0..2000).map(|i| format!("t-{i}")).collect();
    let keys: Vec<String> = (0..2000).map(|i| format!("order-{}", i % 50)).collect();
    let started = Instant::now();
    let outcomes = join_all(
        ids.iter()
            .zip(&keys)
            .map(|(id, key)| p.publish(task(id, key, id.as_bytes()), Duration::from_secs(30))),
    )
    .await;
    eprintln!("2000 publishes confirmed in {:?}", started.elapsed());
    let failed: Vec<_> = outcomes
        .iter()
        .filter(|o| **o != Published::Confirmed)
        .collect();
    assert!(
        failed.is_empty(),
        "{} not confirmed: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    let got = read_all(&url, &topic.name, 3, 2000).await;
    let read: HashSet<String> = got
        .iter()
        .map(|r| r.headers["backstop-task-id"].clone())
        .collect();
    assert_eq!(got.len(), 2000, "no duplicates");
    assert_eq!(read, ids.into_iter().collect::<HashSet<_>>());
}

#[tokio::test]
async fn a_missing_topic_is_permanent_for_the_publisher() {
    let Some(url) = url() else { return };
    let missing = unique("missing");
    let p = publisher(&to_topic(&url, &missing));
    let started = Instant::now();
    let outcome = p
        .publish(task("t-1", "order-7", b"x"), Duration::from_secs(10))
        .await;
    eprintln!("{outcome:?} after {:?}", started.elapsed());
    // Tansu 0.6 creates no topic on demand (and the producer does not ask it to).
    match &outcome {
        Published::Permanent(text) => assert!(text.contains(&missing), "{text}"),
        other => panic!("expected Permanent, got {other:?}"),
    }
}

#[tokio::test]
async fn connecting_to_a_missing_topic_is_a_config_error_naming_it() {
    let Some(url) = url() else { return };
    let missing = unique("missing");
    let e = connect_consumer(&bridge(&url, &missing, "g"))
        .await
        .err()
        .expect("no such topic");
    match e {
        BrokerError::Config(text) => assert!(text.contains(&missing), "{text}"),
        other => panic!("expected Config, got {other}"),
    }
}

#[tokio::test]
async fn connecting_to_a_closed_port_fails_within_a_bound() {
    if url().is_none() {
        return;
    }
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("kafka://127.0.0.1:{closed}");
    let started = Instant::now();
    let e = connect_consumer(&bridge(&url, "t", "g"))
        .await
        .err()
        .expect("nothing listens");
    assert!(e.is_transient(), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn publishing_to_a_closed_port_is_transient_within_the_timeout() {
    if url().is_none() {
        return;
    }
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let p = publisher(&to_topic(&format!("kafka://127.0.0.1:{closed}"), "t"));
    let started = Instant::now();
    let outcomes =
        join_all((0..10).map(|_| p.publish(task("t-1", "order-7", b"x"), Duration::from_secs(2))))
            .await;
    let elapsed = started.elapsed();
    for o in &outcomes {
        assert!(matches!(o, Published::Transient(_)), "{o:?}");
    }
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
    drop(p);
}

/// (partition, offset) of a message.
fn at(m: &Received) -> (i64, i64) {
    (int(m, "partition"), int(m, "offset"))
}

/// Polls both consumers (each `select!` drops the other's `next_batch` half-way, which must
/// lose nothing) until every position in `wanted` has been handed out by one of them.
async fn drive(
    a: &mut Box<dyn backstop_brokers::Consumer>,
    b: &mut Box<dyn backstop_brokers::Consumer>,
    by_a: &mut Vec<Received>,
    by_b: &mut Vec<Received>,
    wanted: &BTreeSet<(i64, i64)>,
) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let seen: BTreeSet<(i64, i64)> = by_a.iter().chain(by_b.iter()).map(at).collect();
        if wanted.is_subset(&seen) {
            return;
        }
        assert!(Instant::now() < deadline, "seen {seen:?}");
        tokio::select! {
            got = a.next_batch(100) => by_a.extend(got.unwrap()),
            got = b.next_batch(100) => by_b.extend(got.unwrap()),
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

#[tokio::test]
async fn a_second_member_takes_a_partition_and_the_revoked_tokens_commit_nothing() {
    let Some(url) = url() else { return };
    let topic = Topic::new(&url, 2).await;
    let group = unique("group");
    let config = bridge(&url, &topic.name, &group);
    let p = producer(&url);
    for i in 0..20 {
        produce(
            &p,
            &topic.name,
            Some(i % 2),
            "k",
            b"old",
            OwnedHeaders::new(),
        )
        .await;
    }
    // A alone holds both partitions: it acks partition 0 (committed: 10) and holds 1.
    let mut a = connect_consumer(&config).await.unwrap();
    let first = receive(&mut a, 20).await;
    let (p0, p1): (Vec<&Received>, Vec<&Received>) = first.iter().partition(|m| at(m).0 == 0);
    a.ack(p0.iter().map(|m| m.token).collect()).await.unwrap();
    assert_eq!(
        committed(&url, &group, &topic.name, 2).await,
        [Some(10), None]
    );

    // B joins: the rebalance revokes A's partitions, and partition 1, never committed, is
    // read again from its start by its new owner (A or B).
    let mut b = connect_consumer(&config).await.unwrap();
    let (mut by_a, mut by_b) = (Vec::new(), Vec::new());
    let again: BTreeSet<(i64, i64)> = (0..10).map(|o| (1, o)).collect();
    drive(&mut a, &mut b, &mut by_a, &mut by_b, &again).await;
    // Then records to both partitions, each to be handed out by its one owner.
    for i in 0..10 {
        produce(
            &p,
            &topic.name,
            Some(i % 2),
            "k",
            b"new",
            OwnedHeaders::new(),
        )
        .await;
    }
    let new: BTreeSet<(i64, i64)> = (10..15).flat_map(|o| [(0, o), (1, o)]).collect();
    drive(&mut a, &mut b, &mut by_a, &mut by_b, &new).await;

    let parts = |ms: &[Received]| ms.iter().map(|m| at(m).0).collect::<BTreeSet<_>>();
    assert_eq!(parts(&by_b).len(), 1, "B took one partition");
    assert_eq!(parts(&by_a).len(), 1, "A kept one partition");
    assert!(
        parts(&by_a).is_disjoint(&parts(&by_b)),
        "each has one owner"
    );
    let all: Vec<(i64, i64)> = by_a.iter().chain(&by_b).map(at).collect();
    let distinct: BTreeSet<&(i64, i64)> = all.iter().collect();
    assert_eq!(all.len(), distinct.len(), "each handed out once: {all:?}");

    // A's tokens of partition 1 from before the rebalance are revoked: acking them is no
    // error and commits nothing.
    a.ack(p1.iter().map(|m| m.token).collect()).await.unwrap();
    assert_eq!(
        committed(&url, &group, &topic.name, 2).await,
        [Some(10), None]
    );

    // Each acks what it got since: everything is committed, nothing was lost.
    a.ack(by_a.iter().map(|m| m.token).collect()).await.unwrap();
    b.ack(by_b.iter().map(|m| m.token).collect()).await.unwrap();
    assert_eq!(
        committed(&url, &group, &topic.name, 2).await,
        [Some(15), Some(15)]
    );
    close(a).await;
    close(b).await;
}

/// Dropping a consumer that is in its group does not hold the runtime's thread while
/// librdkafka leaves the group: on a one-thread runtime a ticker keeps ticking through it.
#[tokio::test(flavor = "current_thread")]
async fn dropping_a_consumer_leaves_the_group_off_the_runtime_thread() {
    let Some(url) = url() else { return };
    let topic = Topic::new(&url, 1).await;
    let p = producer(&url);
    produce(&p, &topic.name, None, "k", b"{}", OwnedHeaders::new()).await;
    let group = unique("group");
    let mut c = connect_consumer(&bridge(&url, &topic.name, &group))
        .await
        .unwrap();
    // In the group, with a partition assigned and a delivery acked: closing has work to do.
    let got = batch(&mut c, 10).await;
    c.ack(got.iter().map(|m| m.token).collect()).await.unwrap();
    let started = Instant::now();
    drop(c);
    let dropped_in = started.elapsed();
    assert!(
        dropped_in < Duration::from_millis(20),
        "the drop held the runtime's only thread for {dropped_in:?}"
    );
    // The group is left all the same: a new member in it is assigned the partition at once
    // and has nothing left to read.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut again = connect_consumer(&bridge(&url, &topic.name, &group))
        .await
        .unwrap();
    assert!(nothing_within(&mut again, Duration::from_secs(3)).await);
    close(again).await;
}
