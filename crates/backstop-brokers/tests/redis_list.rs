//! The reliable Redis list consumer against a real server (`BACKSTOP_TEST_REDIS_URL`): first
//! in, first out; nothing leaves the processing list until acknowledged; what was left there
//! is handed out first by the next consumer.

mod redis_common;

use backstop_brokers::{BrokerError, connect_consumer};
use redis::AsyncCommands;
use redis_common::{Keys, batch, list_bridge, receive, redis, url};
use std::time::Duration;

#[tokio::test]
async fn items_arrive_first_in_first_out_and_acked_ones_leave_processing() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let (list, processing) = (keys.name("list"), keys.name("processing"));
    let mut r = redis(&url).await;
    for item in ["a", "b", "c"] {
        let _: i64 = r.lpush(&list, item).await.unwrap();
    }
    let mut c = connect_consumer(&list_bridge(&url, &list, &processing))
        .await
        .unwrap();
    let got = receive(&mut c, 3).await;
    let bodies: Vec<&[u8]> = got.iter().map(|m| m.body.as_slice()).collect();
    assert_eq!(bodies, [b"a", b"b", b"c"]);
    let origin = &got[0].origin;
    assert_eq!(origin["broker"], "redis");
    assert_eq!(origin["list"], list.as_str());
    assert_eq!(origin["processing"], processing.as_str());
    assert_eq!(origin["recovered"], false);
    assert!(got[0].message_id.is_none() && got[0].headers.is_empty());
    let held: usize = r.llen(&processing).await.unwrap();
    assert_eq!(held, 3, "moved into processing until acknowledged");

    c.ack(got.iter().map(|m| m.token).collect()).await.unwrap();
    let held: usize = r.llen(&processing).await.unwrap();
    let left: usize = r.llen(&list).await.unwrap();
    assert_eq!((held, left), (0, 0));
}

#[tokio::test]
async fn an_unacked_item_is_handed_out_first_by_the_next_consumer() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let (list, processing) = (keys.name("list"), keys.name("processing"));
    let bridge = list_bridge(&url, &list, &processing);
    let mut r = redis(&url).await;
    for item in ["x1", "x2", "x3"] {
        let _: i64 = r.lpush(&list, item).await.unwrap();
    }
    let mut first = connect_consumer(&bridge).await.unwrap();
    let got = receive(&mut first, 2).await;
    assert_eq!(
        (&got[0].body[..], &got[1].body[..]),
        (&b"x1"[..], &b"x2"[..])
    );
    first.ack(vec![got[1].token]).await.unwrap();
    drop(first);
    let held: Vec<Vec<u8>> = r.lrange(&processing, 0, -1).await.unwrap();
    assert_eq!(
        held,
        [b"x1".to_vec()],
        "the unacked item stays in processing"
    );
    let _: i64 = r.lpush(&list, "x4").await.unwrap();

    let mut second = connect_consumer(&bridge).await.unwrap();
    let recovered = batch(&mut second, 10).await;
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].body, b"x1");
    assert_eq!(recovered[0].origin["recovered"], true);
    let fresh = receive(&mut second, 2).await;
    assert_eq!(
        (&fresh[0].body[..], &fresh[1].body[..]),
        (&b"x3"[..], &b"x4"[..])
    );
    assert_eq!(fresh[0].origin["recovered"], false);
    let all = recovered.iter().chain(&fresh).map(|m| m.token).collect();
    second.ack(all).await.unwrap();
    let held: usize = r.llen(&processing).await.unwrap();
    assert_eq!(held, 0);
}

#[tokio::test]
async fn items_waiting_form_full_batches() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let (list, processing) = (keys.name("list"), keys.name("processing"));
    let mut r = redis(&url).await;
    let items: Vec<String> = (0..500).map(|i| format!("item-{i}")).collect();
    let _: i64 = r.lpush(&list, &items).await.unwrap();
    let mut c = connect_consumer(&list_bridge(&url, &list, &processing))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 500 {
        let got = batch(&mut c, 64).await;
        assert_eq!(got.len(), 64.min(500 - seen.len()), "a full batch");
        c.ack(got.iter().map(|m| m.token).collect()).await.unwrap();
        seen.extend(got.into_iter().map(|m| String::from_utf8(m.body).unwrap()));
    }
    assert_eq!(seen, items, "in the order pushed");
    let held: usize = r.llen(&processing).await.unwrap();
    assert_eq!(held, 0);
}

#[tokio::test]
async fn bytes_that_are_not_utf8_survive() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let (list, processing) = (keys.name("list"), keys.name("processing"));
    let mut r = redis(&url).await;
    let item: &[u8] = b"\xff\xfe\x00 not \xc3 utf-8";
    let _: i64 = r.lpush(&list, item).await.unwrap();
    let mut c = connect_consumer(&list_bridge(&url, &list, &processing))
        .await
        .unwrap();
    let got = batch(&mut c, 10).await;
    assert_eq!(got[0].body, item);
    c.ack(vec![got[0].token]).await.unwrap();
    let held: usize = r.llen(&processing).await.unwrap();
    assert_eq!(held, 0, "LREM matched the exact bytes");
}

#[tokio::test]
async fn a_key_of_another_type_is_a_configuration_error() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let (list, processing) = (keys.name("list"), keys.name("processing"));
    let mut r = redis(&url).await;
    let _: () = r.set(&list, "a string").await.unwrap();
    let Err(e) = connect_consumer(&list_bridge(&url, &list, &processing)).await else {
        panic!("connected to a string as a list");
    };
    assert!(matches!(e, BrokerError::Config(_)), "{e}");
    assert!(!e.is_transient());
    let text = e.to_string();
    assert!(text.contains(&list) && text.contains("string"), "{text}");
}

#[tokio::test]
async fn a_dropped_next_batch_strands_nothing() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let (list, processing) = (keys.name("list"), keys.name("processing"));
    let mut r = redis(&url).await;
    let mut c = connect_consumer(&list_bridge(&url, &list, &processing))
        .await
        .unwrap();
    let waited = tokio::time::timeout(Duration::from_millis(200), c.next_batch(10)).await;
    assert!(waited.is_err(), "nothing to take yet");
    // The dropped call's BLMOVE is still blocked on the server and takes this item into
    // processing, where no one would hand it out but for the next call's rescan.
    let _: i64 = r.lpush(&list, "z").await.unwrap();
    let got = batch(&mut c, 10).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, b"z");
    c.ack(vec![got[0].token]).await.unwrap();
    let held: usize = r.llen(&processing).await.unwrap();
    assert_eq!(held, 0);
}
