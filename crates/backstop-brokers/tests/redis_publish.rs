//! The Redis publisher against a real server (`BACKSTOP_TEST_REDIS_URL`): confirmed only on
//! Redis's reply, concurrent publishes on one connection, wrong types permanent, a dead
//! server transient within the timeout.

mod redis_common;

use backstop_brokers::{Outgoing, Published, publisher};
use backstop_core::broker::{BrokerTarget, BrokerUrl, Destination};
use futures_util::future::join_all;
use redis::AsyncCommands;
use redis_common::{Keys, redis, url};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// A stream entry's fields as `XRANGE` answers them.
type Fields = Vec<(String, Vec<u8>)>;

const TIMEOUT: Duration = Duration::from_secs(5);

fn to_list(url: &str, list: &str) -> BrokerTarget {
    BrokerTarget {
        broker: BrokerUrl::new(url),
        destination: Destination::RedisList { list: list.into() },
    }
}

fn task<'a>(id: &'a str, body: &'a [u8]) -> Outgoing<'a> {
    Outgoing {
        id,
        kind: "sms.send",
        key: "order-7",
        attempt: 2,
        traceparent: None,
        body,
        since_enqueued: std::time::Duration::ZERO,
    }
}

#[tokio::test]
async fn concurrent_publishes_to_a_list_are_all_confirmed_and_present() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let list = keys.name("list");
    let p = publisher(&to_list(&url, &list));
    let bodies: Vec<String> = (0..200).map(|i| format!("body-{i}")).collect();
    let outcomes = join_all(
        bodies
            .iter()
            .map(|b| p.publish(task("t", b.as_bytes()), TIMEOUT)),
    )
    .await;
    assert!(
        outcomes.iter().all(|o| *o == Published::Confirmed),
        "{outcomes:?}"
    );
    let mut r = redis(&url).await;
    let stored: Vec<String> = r.lrange(&list, 0, -1).await.unwrap();
    let stored: HashSet<String> = stored.into_iter().collect();
    assert_eq!(stored, bodies.into_iter().collect::<HashSet<_>>());
}

#[tokio::test]
async fn stream_entries_carry_the_task() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let stream = keys.name("stream");
    let target = BrokerTarget {
        broker: BrokerUrl::new(&url),
        destination: Destination::RedisStream {
            stream: stream.clone(),
        },
    };
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let m = Outgoing {
        traceparent: Some(tp),
        ..task("task-1", b"\xff{\"to\":\"+1\"}")
    };
    assert_eq!(
        publisher(&target).publish(m, TIMEOUT).await,
        Published::Confirmed
    );
    let mut r = redis(&url).await;
    let entries: Vec<(String, Fields)> = redis::cmd("XRANGE")
        .arg(&stream)
        .arg("-")
        .arg("+")
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(entries.len(), 1);
    let fields = &entries[0].1;
    let get = |name: &str| {
        fields
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get("id").as_deref(), Some(&b"task-1"[..]));
    assert_eq!(get("kind").as_deref(), Some(&b"sms.send"[..]));
    assert_eq!(get("key").as_deref(), Some(&b"order-7"[..]));
    assert_eq!(get("attempt").as_deref(), Some(&b"2"[..]));
    assert_eq!(get("traceparent").as_deref(), Some(tp.as_bytes()));
    assert_eq!(get("payload").as_deref(), Some(&b"\xff{\"to\":\"+1\"}"[..]));
}

#[tokio::test]
async fn a_key_of_another_type_is_permanent() {
    let Some(url) = url() else { return };
    let mut keys = Keys::new(&url);
    let list = keys.name("list");
    let mut r = redis(&url).await;
    let _: () = r.set(&list, "a string").await.unwrap();
    match publisher(&to_list(&url, &list))
        .publish(task("t", b"x"), TIMEOUT)
        .await
    {
        Published::Permanent(text) => assert!(text.contains("WRONGTYPE"), "{text}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_dead_server_is_transient_within_the_timeout_and_hides_the_password() {
    let Some(_) = url() else { return };
    let p = publisher(&to_list("redis://user:s3cret@127.0.0.1:1/0", "l"));
    let started = Instant::now();
    let timeout = Duration::from_secs(2);
    let outcome = p.publish(task("t", b"x"), timeout).await;
    assert!(started.elapsed() < timeout + Duration::from_millis(500));
    match outcome {
        Published::Transient(text) => assert!(!text.contains("s3cret"), "{text}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_never_answers_is_transient_within_the_timeout() {
    let Some(_) = url() else { return };
    // Accepts connections and says nothing, as a hung server would.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut sockets = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            sockets.push(s);
        }
    });
    let p = publisher(&to_list(&format!("redis://127.0.0.1:{port}/0"), "l"));
    let started = Instant::now();
    let timeout = Duration::from_millis(700);
    let outcome = p.publish(task("t", b"x"), timeout).await;
    assert!(started.elapsed() < timeout + Duration::from_millis(500));
    assert!(matches!(outcome, Published::Transient(_)), "{outcome:?}");
    held.abort();
}
