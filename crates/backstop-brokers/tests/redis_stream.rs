//! The Redis stream consumer against a real server (`BACKSTOP_TEST_REDIS_URL`): entries with
//! their ids and fields, pending entries delivered again to the same consumer first, idle
//! entries of another consumer claimed, acked entries gone from the pending list.

mod redis_common;

use backstop_brokers::{BrokerError, connect_consumer};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redis_common::{Keys, batch, receive, redis, stream_bridge, url};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);

async fn pending(r: &mut MultiplexedConnection, stream: &str, group: &str) -> usize {
    let reply: redis::streams::StreamPendingReply = r.xpending(stream, group).await.unwrap();
    reply.count()
}

async fn add(r: &mut MultiplexedConnection, stream: &str, fields: &[(&str, &[u8])]) -> String {
    r.xadd(stream, "*", fields).await.unwrap()
}

#[tokio::test]
async fn entries_arrive_with_their_ids_and_fields_and_acked_ones_leave_the_pel() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let stream = keys.name("stream");
    let mut r = redis(&url).await;
    let mut c = connect_consumer(&stream_bridge(&url, &stream, "g", "one", LONG))
        .await
        .unwrap();
    let with_payload = add(
        &mut r,
        &stream,
        &[("kind", b"sms"), ("payload", b"{\"n\":1}")],
    )
    .await;
    let without = add(&mut r, &stream, &[("order", b"7")]).await;

    let got = receive(&mut c, 2).await;
    assert_eq!(got[0].message_id.as_deref(), Some(with_payload.as_str()));
    assert_eq!(got[0].body, b"{\"n\":1}", "the body is field payload");
    assert_eq!(got[0].headers["kind"], "sms");
    assert_eq!(got[0].origin["entry_id"], with_payload.as_str());
    assert_eq!(got[0].origin["stream"], stream.as_str());
    assert_eq!(got[0].origin["group"], "g");
    assert_eq!(got[0].origin["delivery_count"], 1);
    assert_eq!(got[0].origin["claimed"], false);
    assert_eq!(got[1].message_id.as_deref(), Some(without.as_str()));
    let body: serde_json::Value = serde_json::from_slice(&got[1].body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"order": "7"}),
        "no payload: the fields"
    );
    assert_eq!(pending(&mut r, &stream, "g").await, 2);

    c.ack(got.iter().map(|m| m.token).collect()).await.unwrap();
    assert_eq!(pending(&mut r, &stream, "g").await, 0);
}

#[tokio::test]
async fn a_new_group_takes_entries_added_before_it() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let stream = keys.name("stream");
    let mut r = redis(&url).await;
    let early = add(&mut r, &stream, &[("payload", b"early")]).await;
    let mut c = connect_consumer(&stream_bridge(&url, &stream, "g", "one", LONG))
        .await
        .unwrap();
    let got = batch(&mut c, 10).await;
    assert_eq!(got[0].message_id.as_deref(), Some(early.as_str()));
}

#[tokio::test]
async fn unacked_entries_come_back_to_the_same_consumer_first() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let stream = keys.name("stream");
    let bridge = stream_bridge(&url, &stream, "g", "one", LONG);
    let mut r = redis(&url).await;
    let a = add(&mut r, &stream, &[("payload", b"a")]).await;
    let b = add(&mut r, &stream, &[("payload", b"b")]).await;
    let mut first = connect_consumer(&bridge).await.unwrap();
    assert_eq!(batch(&mut first, 1).await[0].body, b"a");
    drop(first);
    let c = add(&mut r, &stream, &[("payload", b"c")]).await;

    let mut second = connect_consumer(&bridge).await.unwrap();
    let again = batch(&mut second, 10).await;
    assert_eq!(again.len(), 1, "the pending entry alone, before new ones");
    assert_eq!(again[0].message_id.as_deref(), Some(a.as_str()));
    assert_eq!(again[0].origin["delivery_count"], 2);
    assert_eq!(again[0].origin["claimed"], false);
    let fresh = receive(&mut second, 2).await;
    let ids: Vec<_> = fresh
        .iter()
        .map(|m| m.message_id.clone().unwrap())
        .collect();
    assert_eq!(ids, [b, c]);
    second
        .ack(again.iter().chain(&fresh).map(|m| m.token).collect())
        .await
        .unwrap();
    assert_eq!(pending(&mut r, &stream, "g").await, 0);
}

#[tokio::test]
async fn entries_idle_past_claim_idle_are_claimed_by_another_consumer() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let stream = keys.name("stream");
    let idle = Duration::from_millis(200);
    let mut r = redis(&url).await;
    let a = add(&mut r, &stream, &[("payload", b"a")]).await;
    let mut crashed = connect_consumer(&stream_bridge(&url, &stream, "g", "one", idle))
        .await
        .unwrap();
    assert_eq!(batch(&mut crashed, 10).await.len(), 1);
    let taken = Instant::now();

    let mut other = connect_consumer(&stream_bridge(&url, &stream, "g", "two", idle))
        .await
        .unwrap();
    let got = batch(&mut other, 10).await;
    assert!(
        taken.elapsed() >= idle,
        "claimed only once idle long enough"
    );
    assert_eq!(got[0].message_id.as_deref(), Some(a.as_str()));
    assert_eq!(got[0].origin["claimed"], true);
    assert_eq!(got[0].origin["delivery_count"], 2);
    other.ack(vec![got[0].token]).await.unwrap();
    assert_eq!(pending(&mut r, &stream, "g").await, 0);
}

#[tokio::test]
async fn a_key_of_another_type_is_a_configuration_error() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let stream = keys.name("stream");
    let mut r = redis(&url).await;
    let _: i64 = r.lpush(&stream, "x").await.unwrap();
    let Err(e) = connect_consumer(&stream_bridge(&url, &stream, "g", "one", LONG)).await else {
        panic!("connected to a list as a stream");
    };
    assert!(matches!(e, BrokerError::Config(_)), "{e}");
    assert!(e.to_string().contains("list"), "{e}");
}

#[tokio::test]
async fn a_pending_entry_deleted_from_the_stream_is_acked_not_delivered() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let stream = keys.name("stream");
    let bridge = stream_bridge(&url, &stream, "g", "one", LONG);
    let mut r = redis(&url).await;
    let gone = add(&mut r, &stream, &[("payload", b"gone")]).await;
    let mut first = connect_consumer(&bridge).await.unwrap();
    assert_eq!(batch(&mut first, 10).await.len(), 1);
    drop(first);
    let _: i64 = r.xdel(&stream, &[&gone]).await.unwrap();
    let next = add(&mut r, &stream, &[("payload", b"next")]).await;

    // Its pending read answers [id, nil]: nothing to deliver, so it is acknowledged.
    let mut second = connect_consumer(&bridge).await.unwrap();
    let got = batch(&mut second, 10).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].message_id.as_deref(), Some(next.as_str()));
    assert_eq!(pending(&mut r, &stream, "g").await, 1, "only the new entry");
}

#[tokio::test]
async fn a_dropped_next_batch_strands_nothing() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let stream = keys.name("stream");
    let mut r = redis(&url).await;
    let mut c = connect_consumer(&stream_bridge(&url, &stream, "g", "one", LONG))
        .await
        .unwrap();
    let waited = tokio::time::timeout(Duration::from_millis(200), c.next_batch(10)).await;
    assert!(waited.is_err(), "nothing to read yet");
    // The dropped call's XREADGROUP may still be blocked and read this entry into the
    // pending list, which the next call reads again.
    let id = add(&mut r, &stream, &[("payload", b"z")]).await;
    let got = batch(&mut c, 10).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].message_id.as_deref(), Some(id.as_str()));
    c.ack(vec![got[0].token]).await.unwrap();
    assert_eq!(pending(&mut r, &stream, "g").await, 0);
}
