//! Connections killed server-side (`CLIENT KILL ID`) under the Redis clients, against a real
//! server (`BACKSTOP_TEST_REDIS_URL`): a consumer fails, a new one gets what was not acked;
//! a publisher reports the loss as transient and reconnects. Each test kills the connections
//! opened since it looked, so they run one at a time.

mod redis_common;

use backstop_brokers::{Outgoing, Published, connect_consumer, publisher};
use backstop_core::broker::{BrokerTarget, BrokerUrl, Destination};
use futures_util::future::join_all;
use redis::AsyncCommands;
use redis_common::{Keys, batch, client_ids, kill_clients_since, list_bridge, redis};
use redis_common::{stream_bridge, url};
use std::time::Duration;
use tokio::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

const TIMEOUT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_list_consumer_whose_connection_is_killed_loses_nothing() {
    let Some(url) = url() else { return };
    let _alone = ONE_AT_A_TIME.lock().await;
    let mut keys = Keys::new(&url);
    let (list, processing) = (keys.name("list"), keys.name("processing"));
    let bridge = list_bridge(&url, &list, &processing);
    let mut r = redis(&url).await;
    let _: i64 = r.lpush(&list, &["y1", "y2"]).await.unwrap();

    let before = client_ids(&mut r).await;
    let mut c = connect_consumer(&bridge).await.unwrap();
    assert_eq!(batch(&mut c, 1).await[0].body, b"y1");
    assert_eq!(
        kill_clients_since(&mut r, &before).await,
        2,
        "two connections"
    );
    let after = tokio::time::timeout(TIMEOUT, c.next_batch(10))
        .await
        .unwrap();
    let e = after.expect_err("a killed connection is an error");
    assert!(e.is_transient(), "{e}");
    drop(c);

    let mut again = connect_consumer(&bridge).await.unwrap();
    let recovered = batch(&mut again, 10).await;
    assert_eq!(recovered[0].body, b"y1", "the unacked item first");
    assert_eq!(recovered[0].origin["recovered"], true);
    let rest = batch(&mut again, 10).await;
    assert_eq!(rest[0].body, b"y2");
    again
        .ack(vec![recovered[0].token, rest[0].token])
        .await
        .unwrap();
    let held: usize = r.llen(&processing).await.unwrap();
    assert_eq!(held, 0);
}

#[tokio::test]
async fn a_stream_consumer_whose_connection_is_killed_loses_nothing() {
    let Some(url) = url() else { return };
    let _alone = ONE_AT_A_TIME.lock().await;
    let mut keys = Keys::new(&url);
    let stream = keys.name("stream");
    let bridge = stream_bridge(&url, &stream, "g", "one", Duration::from_secs(60));
    let mut r = redis(&url).await;
    let id: String = r.xadd(&stream, "*", &[("payload", "e1")]).await.unwrap();

    let before = client_ids(&mut r).await;
    let mut c = connect_consumer(&bridge).await.unwrap();
    assert_eq!(batch(&mut c, 10).await[0].body, b"e1");
    assert_eq!(
        kill_clients_since(&mut r, &before).await,
        2,
        "two connections"
    );
    let after = tokio::time::timeout(TIMEOUT, c.next_batch(10))
        .await
        .unwrap();
    assert!(after.expect_err("a killed connection").is_transient());
    drop(c);

    let mut again = connect_consumer(&bridge).await.unwrap();
    let got = batch(&mut again, 10).await;
    assert_eq!(got[0].message_id.as_deref(), Some(id.as_str()));
    assert_eq!(got[0].origin["delivery_count"], 2);
    again.ack(vec![got[0].token]).await.unwrap();
    let pending: redis::streams::StreamPendingReply = r.xpending(&stream, "g").await.unwrap();
    assert_eq!(pending.count(), 0);
}

#[tokio::test]
async fn a_publisher_shares_one_connection_and_reconnects_after_it_is_killed() {
    let Some(url) = url() else { return };
    let _alone = ONE_AT_A_TIME.lock().await;
    let mut keys = Keys::new(&url);
    let list = keys.name("list");
    let p = publisher(&BrokerTarget {
        broker: BrokerUrl::new(&url),
        destination: Destination::RedisList { list: list.clone() },
    });
    let m = Outgoing {
        id: "t",
        kind: "k",
        key: "k",
        attempt: 1,
        traceparent: None,
        body: b"x",
        since_enqueued: std::time::Duration::ZERO,
    };
    let mut r = redis(&url).await;
    let before = client_ids(&mut r).await;
    let outcomes = join_all((0..50).map(|_| p.publish(m, TIMEOUT))).await;
    assert!(outcomes.iter().all(|o| *o == Published::Confirmed));
    assert_eq!(
        kill_clients_since(&mut r, &before).await,
        1,
        "one connection"
    );

    let lost = p.publish(m, TIMEOUT).await;
    assert!(matches!(lost, Published::Transient(_)), "{lost:?}");
    assert_eq!(p.publish(m, TIMEOUT).await, Published::Confirmed);
    let stored: usize = r.llen(&list).await.unwrap();
    assert_eq!(stored, 51);
}
