//! Crash test of a RabbitMQ bridge: `backstop serve` is killed with SIGKILL 20 times while it
//! takes 10,000 messages from a real RabbitMQ (`BACKSTOP_TEST_AMQP_URL`), restarted each time,
//! with `engine.bridge_ack_delay` widening the window between a batch's commit and its ack so
//! that kills land there. In the end there is exactly one task per message, none lost and
//! none doubled, the queue is empty, and the timelines count the redeliveries the kills caused.

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
use std::time::Duration;

const MESSAGES: usize = 10_000;
const KILLS: usize = 20;
const VAR: &str = "BACKSTOP_TEST_AMQP_URL";

fn config(url: &str, queue: &str, db: &str) -> String {
    format!(
        "database = \"{db}\"\n\
         [engine]\npoll_interval = \"50ms\"\nbridge_ack_delay = \"30ms\"\nbridge_beat = \"200ms\"\n\
         [kinds.\"sms.send\"]\ntarget = \"pull\"\n\
         [bridges.sms-in]\nbroker = \"{url}\"\nqueue = \"{queue}\"\nkind = \"sms.send\"\nkey = \"/order_id\"\nprefetch = 64\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_commit_and_ack_loses_and_doubles_nothing() {
    let Some(url) = std::env::var(VAR).ok().filter(|u| !u.is_empty()) else {
        eprintln!("skipped: {VAR} is not set");
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
    ch.queue_declare(
        ShortString::from(queue.as_str()),
        QueueDeclareOptions::durable(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    for i in 0..MESSAGES {
        let body = format!(r#"{{"order_id":"O-{i}","to":"+8613800000000"}}"#);
        // Not waiting for each confirm: the last wait covers them all.
        ch.basic_publish(
            ShortString::from(""),
            ShortString::from(queue.as_str()),
            BasicPublishOptions::default(),
            body.as_bytes(),
            BasicProperties::default().with_delivery_mode(2),
        )
        .await
        .unwrap();
    }
    assert!(ch.wait_for_confirms().await.unwrap().is_empty());

    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("backstop.db").display());
    let w = Workdir::new(&config(&url, &queue, &db));
    let store = backstop::open_store(&db).await.unwrap();
    let counted = |store: std::sync::Arc<dyn backstop_core::Store>| async move {
        store
            .counts(CountsParams {
                kind: Some("sms.send".into()),
            })
            .await
            .map(|c| c.total() as usize)
            .unwrap_or(0)
    };
    let mut killed = 0;
    while killed < KILLS {
        let before = counted(store.clone()).await;
        let mut serve = w.serve();
        // Kill while messages flow: once some have landed, at a random moment.
        let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
        while counted(store.clone()).await < before + 50 && tokio::time::Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(rand::rng().random_range(0..60))).await;
        signal(&serve, libc::SIGKILL);
        assert!(!serve.wait().await.unwrap().success());
        killed += 1;
        if counted(store.clone()).await >= MESSAGES {
            break;
        }
    }
    assert!(
        killed >= 10,
        "only {killed} kills landed before the queue was drained"
    );

    // A last process takes the rest.
    let mut serve = w.serve();
    let s = store.clone();
    wait_for(
        Duration::from_secs(120),
        "every message in the ledger",
        || {
            let s = s.clone();
            async move { (counted(s).await >= MESSAGES).then_some(()) }
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
    tokio::time::sleep(Duration::from_millis(300)).await;
    let depth = ch
        .queue_declare(
            ShortString::from(queue.as_str()),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap()
        .message_count();
    signal(&serve, libc::SIGTERM);
    assert!(serve.wait().await.unwrap().success());
    assert_eq!(depth, 0, "every message acknowledged in the end");

    let all = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(
        all.total() as usize,
        MESSAGES,
        "exactly one task per message: {all:?}"
    );
    assert_eq!(all.pending as usize, MESSAGES);
    // The kills left committed messages unacknowledged: they came again and were counted.
    let tasks = store
        .list(ListParams {
            kind: Some("sms.send".into()),
            limit: MESSAGES,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut keys: Vec<&str> = tasks.iter().map(|t| t.key.as_str()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), MESSAGES);
    let mut redelivered = 0;
    for t in &tasks {
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
    let _ = ch
        .queue_delete(
            ShortString::from(queue.as_str()),
            QueueDeleteOptions::default(),
        )
        .await;
}
