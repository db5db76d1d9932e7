//! The NATS JetStream consumer and publisher against a real server (`BACKSTOP_TEST_NATS_URL`,
//! nats-server 2.9 or later with JetStream): deliveries with their origin, acks confirmed,
//! unacked messages delivered again, poison after MaxDeliver, the ack-pending count, PubAcks
//! (duplicates included), and what connecting refuses.

mod nats_common;

use async_nats::jetstream::consumer::{self, AckPolicy};
use backstop_brokers::{
    AckPending, BrokerError, Outgoing, Published, connect_consumer, delete_source, publisher,
};
use backstop_core::broker::{BrokerTarget, BrokerUrl, Destination};
use nats_common::{
    Names, Proxy, batch, bridge, js, nats_consumer, nothing_within, publish, receive, url,
};
use std::time::Duration;

#[tokio::test]
async fn messages_arrive_with_their_origin_and_acked_ones_are_gone() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, prefix) = names.stream(&js).await;
    let subject = format!("{prefix}.orders");
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    for i in 0..5 {
        let id = format!("id-{i}");
        let mut headers = vec![("Nats-Msg-Id", id.as_str()), ("x-order", "7")];
        if i == 0 {
            headers.push(("traceparent", tp));
        }
        publish(&js, &subject, &headers, &format!("{{\"n\":{i}}}")).await;
    }
    let config = nats_consumer(&stream, "bridge", Some(format!("{prefix}.>")));
    let mut c = connect_consumer(&bridge(&url, config.clone()))
        .await
        .unwrap();

    let got = receive(&mut c, 5).await;
    for (i, m) in got.iter().enumerate() {
        assert_eq!(m.body, format!("{{\"n\":{i}}}").as_bytes());
        assert_eq!(m.message_id.as_deref(), Some(format!("id-{i}").as_str()));
        assert_eq!(m.headers["x-order"], "7");
        assert_eq!(m.message_key, None);
        assert!(m.poison.is_none() && m.death.is_none());
        let o = &m.origin;
        assert_eq!(o["broker"], "nats");
        assert_eq!(o["stream"], stream.as_str());
        assert_eq!(o["consumer"], "bridge");
        assert_eq!(o["subject"], subject.as_str());
        assert_eq!(o["stream_seq"], i as u64 + 1);
        assert_eq!(o["consumer_seq"], i as u64 + 1);
        assert_eq!(o["delivered"], 1);
        assert_eq!(o["pending"], 4 - i as u64, "messages left after this one");
        assert!(o.get("poison").is_none());
    }
    assert_eq!(got[0].origin["traceparent"], tp);
    assert!(got[1].origin.get("traceparent").is_none());

    c.ack(got.iter().map(|m| m.token).collect()).await.unwrap();
    drop(c);
    let mut again = connect_consumer(&bridge(&url, config)).await.unwrap();
    nothing_within(&mut again, Duration::from_millis(1500)).await;
    let info = js
        .get_stream(&stream)
        .await
        .unwrap()
        .consumer_info("bridge")
        .await
        .unwrap();
    assert_eq!(info.num_ack_pending, 0, "every delivery acked");
    assert_eq!(info.num_pending, 0);
    assert_eq!(info.ack_floor.stream_sequence, 5);
}

#[tokio::test]
async fn the_consumer_is_created_as_configured_and_an_existing_one_is_used_as_it_is() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, prefix) = names.stream(&js).await;
    let mut config = nats_consumer(&stream, "made", Some(format!("{prefix}.a")));
    config.ack_wait = Duration::from_secs(7);
    config.max_deliver = 3;
    config.max_ack_pending = 42;
    let c = connect_consumer(&bridge(&url, config.clone()))
        .await
        .unwrap();
    drop(c);
    let s = js.get_stream(&stream).await.unwrap();
    let info = s.consumer_info("made").await.unwrap();
    assert_eq!(info.config.durable_name.as_deref(), Some("made"));
    assert_eq!(info.config.deliver_subject, None, "a pull consumer");
    assert_eq!(info.config.ack_policy, AckPolicy::Explicit);
    assert_eq!(info.config.ack_wait, Duration::from_secs(7));
    assert_eq!(info.config.max_deliver, 3);
    assert_eq!(info.config.max_ack_pending, 42);
    assert_eq!(info.config.filter_subject, format!("{prefix}.a"));

    // Configured otherwise now: the consumer on the server keeps its own settings.
    config.max_ack_pending = 5;
    let mut c = connect_consumer(&bridge(&url, config)).await.unwrap();
    assert_eq!(
        c.ack_pending().await.unwrap(),
        Some(AckPending {
            pending: 0,
            max: 42
        })
    );
}

#[tokio::test]
async fn unacked_messages_are_delivered_again_after_ack_wait() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, prefix) = names.stream(&js).await;
    let subject = format!("{prefix}.x");
    for i in 0..3 {
        publish(&js, &subject, &[], &format!("m{i}")).await;
    }
    let mut config = nats_consumer(&stream, "again", None);
    config.ack_wait = Duration::from_secs(1);
    let mut first = connect_consumer(&bridge(&url, config.clone()))
        .await
        .unwrap();
    let got = receive(&mut first, 3).await;
    assert!(got.iter().all(|m| m.origin["delivered"] == 1));
    drop(first);

    let mut second = connect_consumer(&bridge(&url, config)).await.unwrap();
    let again = receive(&mut second, 3).await;
    let bodies = |v: &[backstop_brokers::Received]| -> Vec<Vec<u8>> {
        v.iter().map(|m| m.body.clone()).collect()
    };
    assert_eq!(bodies(&again), bodies(&got));
    for (a, g) in again.iter().zip(&got) {
        assert_eq!(a.origin["stream_seq"], g.origin["stream_seq"]);
        assert_eq!(a.origin["delivered"], 2, "delivered a second time");
    }
    second
        .ack(again.iter().map(|m| m.token).collect())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_batch_dropped_mid_wait_loses_nothing() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, prefix) = names.stream(&js).await;
    let mut c = connect_consumer(&bridge(&url, nats_consumer(&stream, "drop", None)))
        .await
        .unwrap();
    // The call waits on an open pull request and is dropped; the message published next is
    // delivered to that request's inbox, which outlives the call.
    nothing_within(&mut c, Duration::from_millis(300)).await;
    publish(&js, &format!("{prefix}.x"), &[], "late").await;
    let got = batch(&mut c, 10).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, b"late");
    assert_eq!(
        got[0].origin["delivered"], 1,
        "not a redelivery after AckWait"
    );
}

#[tokio::test]
async fn a_message_past_max_deliver_comes_back_as_poison() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, prefix) = names.stream(&js).await;
    publish(&js, &format!("{prefix}.x"), &[], "first").await;
    publish(
        &js,
        &format!("{prefix}.x"),
        &[("Nats-Msg-Id", "p-1")],
        "bad",
    )
    .await;
    let mut config = nats_consumer(&stream, "poison", None);
    config.ack_wait = Duration::from_secs(1);
    config.max_deliver = 2;
    let mut c = connect_consumer(&bridge(&url, config)).await.unwrap();

    let one = receive(&mut c, 2).await;
    c.ack(vec![one[0].token]).await.unwrap();
    let two = batch(&mut c, 10).await;
    assert_eq!(two.len(), 1);
    assert_eq!(two[0].body, b"bad");
    assert_eq!(two[0].origin["delivered"], 2);
    assert!(
        two[0].poison.is_none(),
        "the last delivery is not poison yet"
    );

    let three = batch(&mut c, 10).await;
    assert_eq!(three.len(), 1);
    let p = &three[0];
    let reason = p.poison.as_deref().expect("poison");
    assert!(reason.starts_with("poison"), "{reason}");
    assert!(
        reason.contains("delivered 2 times (MaxDeliver 2)"),
        "{reason}"
    );
    assert_eq!(p.body, b"bad");
    assert_eq!(p.message_id.as_deref(), Some("p-1"));
    assert_eq!(p.origin["poison"], true);
    assert_eq!(p.origin["stream_seq"], 2);
    assert_eq!(p.origin["delivered"], 2);
    assert_eq!(p.origin["subject"], format!("{prefix}.x").as_str());
    // Nothing to ack: the server already gave up.
    c.ack(vec![p.token]).await.unwrap();
    nothing_within(&mut c, Duration::from_millis(1500)).await;
}

#[tokio::test]
async fn ack_pending_counts_unacked_deliveries_against_max_ack_pending() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, prefix) = names.stream(&js).await;
    for i in 0..4 {
        publish(&js, &format!("{prefix}.x"), &[], &format!("m{i}")).await;
    }
    let mut config = nats_consumer(&stream, "pending", None);
    config.max_ack_pending = 10;
    let mut c = connect_consumer(&bridge(&url, config)).await.unwrap();
    assert_eq!(
        c.ack_pending().await.unwrap(),
        Some(AckPending {
            pending: 0,
            max: 10
        })
    );
    let got = receive(&mut c, 4).await;
    assert_eq!(
        c.ack_pending().await.unwrap(),
        Some(AckPending {
            pending: 4,
            max: 10
        })
    );
    c.ack(vec![got[0].token, got[1].token]).await.unwrap();
    // The acks' confirmations come later: once they are in, the server counts two fewer.
    c.settle_acks().await.unwrap();
    assert_eq!(
        c.ack_pending().await.unwrap(),
        Some(AckPending {
            pending: 2,
            max: 10
        })
    );

    // MaxAckPending -1: no limit to approach.
    let mut unlimited = nats_consumer(&stream, "unlimited", None);
    unlimited.max_ack_pending = -1;
    let mut u = connect_consumer(&bridge(&url, unlimited)).await.unwrap();
    assert_eq!(u.ack_pending().await.unwrap(), None);
}

#[tokio::test]
async fn a_lost_connection_is_an_error_and_the_next_connection_gets_the_unacked_again() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, prefix) = names.stream(&js).await;
    publish(&js, &format!("{prefix}.x"), &[], "held").await;
    let proxy = Proxy::start(&url).await;
    let mut config = nats_consumer(&stream, "cut", None);
    config.ack_wait = Duration::from_secs(1);
    let mut c = connect_consumer(&bridge(&proxy.url, config.clone()))
        .await
        .unwrap();
    let got = batch(&mut c, 10).await;
    assert_eq!(got[0].origin["delivered"], 1);

    proxy.cut();
    let failed = async {
        loop {
            match c.next_batch(10).await {
                Ok(b) => assert!(b.is_empty(), "a batch after the cut"),
                Err(e) => return e,
            }
        }
    };
    let e = tokio::time::timeout(Duration::from_secs(10), failed)
        .await
        .expect("an error within 10 s after the connection is cut");
    assert!(matches!(e, BrokerError::Connection { .. }), "{e:?}");
    // Not ridden out: the same consumer keeps saying so until it is dropped (its message
    // left unacked).
    assert!(c.next_batch(1).await.is_err());
    drop(c);

    let mut again = connect_consumer(&bridge(&proxy.url, config)).await.unwrap();
    let back = batch(&mut again, 10).await;
    assert_eq!(back[0].body, b"held");
    assert!(back[0].origin["delivered"].as_i64().unwrap() >= 2);
    again.ack(vec![back[0].token]).await.unwrap();
}

fn outgoing<'a>(id: &'a str, attempt: u32, body: &'a [u8]) -> Outgoing<'a> {
    Outgoing {
        id,
        kind: "sms.send",
        key: "order-7",
        attempt,
        traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        body,
        since_enqueued: std::time::Duration::ZERO,
    }
}

fn target(url: &str, subject: &str) -> BrokerTarget {
    BrokerTarget {
        broker: BrokerUrl::new(url),
        destination: Destination::NatsSubject {
            subject: subject.into(),
        },
    }
}

const TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_publish_carries_the_task_id_and_a_repeat_is_stored_once() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, prefix) = names.stream(&js).await;
    let p = publisher(&target(&url, &format!("{prefix}.sms")));
    let body = br#"{"to":"+1555"}"#;
    assert_eq!(
        p.publish(outgoing("task-1", 1, body), TIMEOUT).await,
        Published::Confirmed
    );
    let s = js.get_stream(&stream).await.unwrap();
    let m = s.get_raw_message(1).await.unwrap();
    assert_eq!(&m.payload[..], body);
    let h = |k: &str| m.headers.get(k).map(|v| v.as_str().to_string());
    assert_eq!(h("Nats-Msg-Id").as_deref(), Some("task-1"));
    assert_eq!(h("backstop-task-id").as_deref(), Some("task-1"));
    assert_eq!(h("backstop-kind").as_deref(), Some("sms.send"));
    assert_eq!(h("backstop-key").as_deref(), Some("order-7"));
    assert_eq!(h("backstop-attempt").as_deref(), Some("1"));
    assert_eq!(
        h("traceparent").as_deref(),
        Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    );

    // A retry within the duplicate window: the PubAck says duplicate, which is confirmed,
    // and noted for the attempt's record.
    match p.publish(outgoing("task-1", 2, body), TIMEOUT).await {
        Published::ConfirmedWithNote(n) => assert!(
            n.contains("already held this task id") && n.contains(&stream),
            "{n}"
        ),
        other => panic!("a duplicate PubAck is confirmed with its note: {other:?}"),
    }
    let info = js
        .get_stream(&stream)
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    assert_eq!(info.state.messages, 1, "stored once");
}

#[tokio::test]
async fn a_retry_past_the_duplicate_window_is_noted_and_one_within_it_is_not() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let stream = Names::unique("window");
    js.create_stream(async_nats::jetstream::stream::Config {
        name: stream.clone(),
        subjects: vec![format!("{stream}.>")],
        duplicate_window: Duration::from_secs(1),
        ..Default::default()
    })
    .await
    .unwrap();
    names.own(&stream);
    let p = publisher(&target(&url, &format!("{stream}.sms")));
    let body = b"{}";
    let aged = |id, attempt, age| Outgoing {
        since_enqueued: age,
        ..outgoing(id, attempt, body)
    };
    // A retry whose earlier attempts never reached the stream, within the window of the
    // task's age: stored as new, and nothing to say.
    assert_eq!(
        p.publish(aged("fresh", 2, Duration::from_millis(300)), TIMEOUT)
            .await,
        Published::Confirmed
    );
    assert_eq!(
        p.publish(outgoing("old", 1, body), TIMEOUT).await,
        Published::Confirmed
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Past the window the stream no longer knows the id: stored again, and the attempt says
    // so, with the window it read from the stream.
    match p
        .publish(aged("old", 3, Duration::from_millis(1600)), TIMEOUT)
        .await
    {
        Published::ConfirmedWithNote(n) => assert!(
            n.contains("past stream")
                && n.contains("duplicate window of 1s")
                && n.contains("twice"),
            "{n}"
        ),
        other => panic!("a retry past the window is noted: {other:?}"),
    }
    let info = js
        .get_stream(&stream)
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    assert_eq!(info.state.messages, 3, "the late retry was stored again");
}

#[tokio::test]
async fn a_subject_no_stream_takes_is_permanent() {
    let Some(url) = url() else { return };
    let subject = format!("{}.nowhere", Names::unique("nostream"));
    let p = publisher(&target(&url, &subject));
    match p.publish(outgoing("task-x", 1, b"{}"), TIMEOUT).await {
        Published::Permanent(text) => {
            assert!(text.contains(&subject), "{text}");
            assert!(text.contains("no responders"), "{text}");
        }
        other => panic!("expected Permanent, got {other:?}"),
    }
}

#[tokio::test]
async fn concurrent_publishes_are_pipelined_and_all_confirmed() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, prefix) = names.stream(&js).await;
    let p = publisher(&target(&url, &format!("{prefix}.many")));
    let ids: Vec<String> = (0..2000).map(|i| format!("many-{i}")).collect();
    let started = std::time::Instant::now();
    let all = futures_util::future::join_all(
        ids.iter()
            .map(|id| p.publish(outgoing(id, 1, id.as_bytes()), TIMEOUT)),
    )
    .await;
    let took = started.elapsed();
    let confirmed = all.iter().filter(|p| **p == Published::Confirmed).count();
    assert_eq!(
        confirmed,
        2000,
        "{:?}",
        all.iter().find(|p| **p != Published::Confirmed)
    );
    let info = js
        .get_stream(&stream)
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    assert_eq!(info.state.messages, 2000);
    // One at a time this is 2,000 round trips; pipelined it is well under a few seconds.
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[tokio::test]
async fn a_publisher_connects_again_after_its_connection_is_lost() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, prefix) = names.stream(&js).await;
    let proxy = Proxy::start(&url).await;
    let p = publisher(&target(&proxy.url, &format!("{prefix}.cut")));
    assert_eq!(
        p.publish(outgoing("before", 1, b"1"), TIMEOUT).await,
        Published::Confirmed
    );
    // Down long enough for async-nats's one reconnect to fail: the client gives up, and the
    // publisher must open a connection of its own.
    proxy.refuse(true);
    proxy.cut();
    let down = p
        .publish(outgoing("after", 1, b"2"), Duration::from_secs(2))
        .await;
    assert!(matches!(down, Published::Transient(_)), "{down:?}");
    proxy.refuse(false);
    let mut outcomes = vec![down];
    for attempt in 2..=10 {
        let got = p
            .publish(outgoing("after", attempt, b"2"), Duration::from_secs(2))
            .await;
        let done = got == Published::Confirmed;
        outcomes.push(got);
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(outcomes.last(), Some(&Published::Confirmed), "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Published::Confirmed | Published::Transient(_))),
        "{outcomes:?}"
    );
    let info = js
        .get_stream(&stream)
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    assert_eq!(info.state.messages, 2, "each task once");
}

#[tokio::test]
async fn connecting_refuses_a_missing_stream_and_reports_a_closed_port() {
    let Some(url) = url() else { return };
    let missing = Names::unique("missing");
    let e = match connect_consumer(&bridge(&url, nats_consumer(&missing, "c", None))).await {
        Err(e) => e,
        Ok(_) => panic!("connected to a missing stream"),
    };
    assert!(matches!(e, BrokerError::Config(_)), "{e:?}");
    assert!(e.to_string().contains(&missing), "{e}");
    assert!(!e.to_string().contains('\n'), "one line: {e}");

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let closed = format!("nats://127.0.0.1:{port}");
    let e = match connect_consumer(&bridge(&closed, nats_consumer("s", "c", None))).await {
        Err(e) => e,
        Ok(_) => panic!("connected to a closed port"),
    };
    assert!(matches!(e, BrokerError::Connection { .. }), "{e:?}");
    assert!(e.is_transient());
}

#[tokio::test]
async fn an_existing_push_or_non_explicit_consumer_is_refused() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, _) = names.stream(&js).await;
    let s = js.get_stream(&stream).await.unwrap();
    s.create_consumer(consumer::push::Config {
        durable_name: Some("pushed".into()),
        deliver_subject: Names::unique("deliver"),
        ack_policy: AckPolicy::Explicit,
        ..Default::default()
    })
    .await
    .unwrap();
    s.create_consumer(consumer::pull::Config {
        durable_name: Some("noack".into()),
        ack_policy: AckPolicy::None,
        ..Default::default()
    })
    .await
    .unwrap();

    for (name, says) in [("pushed", "push consumer"), ("noack", "not Explicit")] {
        let e = match connect_consumer(&bridge(&url, nats_consumer(&stream, name, None))).await {
            Err(e) => e,
            Ok(_) => panic!("{name} was taken"),
        };
        assert!(matches!(e, BrokerError::Config(_)), "{e:?}");
        let text = e.to_string();
        assert!(text.contains(name) && text.contains(says), "{text}");
    }
}

#[tokio::test]
async fn delete_source_deletes_the_stream() {
    let Some(url) = url() else { return };
    let js = js(&url).await;
    let mut names = Names::new(&url);
    let (stream, _) = names.stream(&js).await;
    let b = bridge(&url, nats_consumer(&stream, "c", None));
    delete_source(&b).await.unwrap();
    assert!(js.get_stream(&stream).await.is_err(), "deleted");
    // Deleting what is not there is fine.
    delete_source(&b).await.unwrap();
}
