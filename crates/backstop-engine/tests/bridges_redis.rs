//! Redis bridges (a reliable list, a stream) and Redis targets through a real engine on
//! SQLite and a real Redis (`BACKSTOP_TEST_REDIS_URL`, e.g. `redis://127.0.0.1:6379/0`);
//! skipped with a visible line without one.

use backstop_core::broker::{
    BridgeConfig, BridgeSource, BrokerTarget, BrokerUrl, Destination, KeySource,
};
use backstop_core::store::{CountsParams, GetByKeyParams, ListParams};
use backstop_core::{KindConfig, Status, Target};
use backstop_engine::{Engine, EnqueueRequest};
mod brokers;
use brokers::{Running, options, server, store, unique, until};
use redis::AsyncCommands;
use std::time::{Duration, Instant};

async fn redis(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

fn bridge(url: &str, source: BridgeSource, key: &str) -> BridgeConfig {
    BridgeConfig {
        name: "sms-in".into(),
        broker: BrokerUrl::new(url),
        source,
        kind: "sms.send".into(),
        key: KeySource::parse(key).unwrap(),
        prefetch: 64,
        dead_letters: false,
        max_message: 1 << 16,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reliable_list_becomes_tasks_and_leaves_its_processing_list_empty() {
    let Some(url) = server("BACKSTOP_TEST_REDIS_URL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let (list, processing) = (
        unique("backstop-test:sms"),
        unique("backstop-test:processing"),
    );
    let mut r = redis(&url).await;
    // What a crashed consumer left in the processing list is taken first.
    let _: () = r.lpush(&processing, r#"{"order_id":"P-0"}"#).await.unwrap();
    for i in 1..=200 {
        let _: () = r
            .lpush(&list, format!(r#"{{"order_id":"P-{i}"}}"#))
            .await
            .unwrap();
    }
    let _: () = r.lpush(&list, "not json").await.unwrap();
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new("sms.send", Target::Pull))
        .bridge(bridge(
            &url,
            BridgeSource::RedisList {
                list: list.clone(),
                processing: processing.clone(),
            },
            "/order_id",
        ))
        .options(options())
        .build()
        .unwrap();
    let run = Running::start(&engine);
    {
        until(&engine, "202 settled", |v| {
            v[0].inserted + v[0].rejected == 202
        })
        .await;
        let v = &engine.bridges()[0];
        assert_eq!(
            (v.received, v.inserted, v.rejected, v.in_flight),
            (202, 201, 1, 0)
        );
    }
    run.stop().await;
    let c = store
        .counts(CountsParams {
            kind: Some("sms.send".into()),
        })
        .await
        .unwrap();
    assert_eq!(c.pending, 201);
    let left: usize = r.llen(&list).await.unwrap();
    let held: usize = r.llen(&processing).await.unwrap();
    assert_eq!((left, held), (0, 0), "every item removed once committed");
    let rejected = store
        .list(ListParams {
            kind: Some("backstop.rejected.sms-in".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].status, Status::Failed);
    let _: () = r.del(&[&list, &processing]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_read_by_a_group_becomes_tasks_keyed_by_a_field_and_is_acked() {
    let Some(url) = server("BACKSTOP_TEST_REDIS_URL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let stream = unique("backstop-test:orders");
    let mut r = redis(&url).await;
    for i in 0..100 {
        let _: String = r
            .xadd(
                &stream,
                "*",
                &[
                    ("order", format!("S-{i}")),
                    ("payload", format!(r#"{{"n":{i}}}"#)),
                ],
            )
            .await
            .unwrap();
    }
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new("sms.send", Target::Pull))
        .bridge(bridge(
            &url,
            BridgeSource::RedisStream {
                stream: stream.clone(),
                group: "backstop".into(),
                consumer: "c1".into(),
                claim_idle: Duration::from_secs(60),
            },
            "field:order",
        ))
        .options(options())
        .build()
        .unwrap();
    let run = Running::start(&engine);
    {
        until(&engine, "100 inserted", |v| v[0].inserted == 100).await;
    }
    run.stop().await;
    let t = store
        .get_by_key(GetByKeyParams {
            kind: "sms.send".into(),
            key: "S-7".into(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.payload, br#"{"n":7}"#);
    let pending: redis::streams::StreamPendingReply =
        r.xpending(&stream, "backstop").await.unwrap();
    assert_eq!(pending.count(), 0, "every entry acknowledged");
    let _: () = r.del(&stream).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_redis_kinds_are_pushed_to_a_list_and_added_to_a_stream() {
    let Some(url) = server("BACKSTOP_TEST_REDIS_URL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let (list, stream, wrong) = (
        unique("backstop-test:out-list"),
        unique("backstop-test:out-stream"),
        unique("backstop-test:wrong"),
    );
    let mut r = redis(&url).await;
    let _: () = r.set(&wrong, "a string, not a list").await.unwrap();
    let to = |d: Destination| {
        Target::Broker(BrokerTarget {
            broker: BrokerUrl::new(url.clone()),
            destination: d,
        })
    };
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new(
            "to.list",
            to(Destination::RedisList { list: list.clone() }),
        ))
        .kind(KindConfig::new(
            "to.stream",
            to(Destination::RedisStream {
                stream: stream.clone(),
            }),
        ))
        .kind(KindConfig::new(
            "to.wrong",
            to(Destination::RedisList {
                list: wrong.clone(),
            }),
        ))
        .options(options())
        .build()
        .unwrap();
    let run = Running::start(&engine);
    {
        let mut ids = Vec::new();
        for kind in ["to.list", "to.stream", "to.wrong"] {
            for i in 0..20 {
                let e = engine
                    .enqueue(EnqueueRequest {
                        kind: kind.into(),
                        key: format!("K-{i}"),
                        payload: format!(r#"{{"i":{i}}}"#).into_bytes(),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                if kind == "to.stream" {
                    ids.push(e.id.to_string());
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let c = |k: &str| {
                store.counts(CountsParams {
                    kind: Some(k.into()),
                })
            };
            let (l, s, w) = (
                c("to.list").await.unwrap(),
                c("to.stream").await.unwrap(),
                c("to.wrong").await.unwrap(),
            );
            if l.succeeded == 20 && s.succeeded == 20 && w.failed == 20 {
                break;
            }
            assert!(Instant::now() < deadline, "{l:?} {s:?} {w:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let items: Vec<String> = r.lrange(&list, 0, -1).await.unwrap();
        assert_eq!(items.len(), 20);
        let entries: redis::streams::StreamRangeReply = r.xrange_all(&stream).await.unwrap();
        let mut seen: Vec<String> = entries
            .ids
            .iter()
            .map(|e| e.get::<String>("id").unwrap())
            .collect();
        seen.sort();
        ids.sort();
        assert_eq!(seen, ids, "each entry carries its task id");
        let wrong_task = store
            .get_by_key(GetByKeyParams {
                kind: "to.wrong".into(),
                key: "K-0".into(),
            })
            .await
            .unwrap()
            .unwrap();
        assert!(
            wrong_task
                .last_error
                .unwrap_or_default()
                .contains("WRONGTYPE")
        );
    }
    run.stop().await;
    let _: () = r.del(&[&list, &stream, &wrong]).await.unwrap();
}
