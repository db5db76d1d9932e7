//! `backstop bench brokers`: broker bridges and targets on a fresh SQLite ledger
//! (`synchronous = FULL`), each next to the raw ceiling of the same client in the same run:
//!
//! 1. raw consume: a queue (list, stream, topic) of N messages drained by backstop's own
//!    consumer, acking each batch, with no ledger;
//! 2. bridge: the same, through a bridge: every message a committed task before its ack;
//! 3. raw publish: N confirmed publishes by backstop's own publisher, C in flight, no ledger;
//! 4. target: N tasks of a broker kind (concurrency C), each published and confirmed, its
//!    outcome committed.
//!
//! Channels: `rabbitmq` (a durable queue through the default exchange), `redis list`,
//! `redis stream`, `kafka` (a topic of its own, read by a consumer group of its own) and
//! `nats` (a JetStream stream of its own, read by a durable pull consumer). What is particular
//! to each (making its queue, addressing it, removing it) is a [`Broker`] in `brokers/`;
//! [`measure`] is the same for all. Each phase that waits on the broker gives up after
//! [`PHASE_LIMIT`], so a stalled broker ends the bench with an error instead of a hang.

mod kafka;
mod nats;
mod rabbitmq;
mod redis;

use super::place::TempDir;
use crate::cli::BrokersBenchArgs;
use crate::commands::print_json;
use anyhow::{Context as _, Result, bail};
use backstop::{Engine, EngineOptions, EnqueueRequest, KindConfig, Target, open_store};
use backstop_brokers::{
    BrokerKind, Outgoing, check_url, connect_consumer, delete_source, publisher,
};
use backstop_core::broker::{
    BridgeConfig, BridgeSource, BrokerTarget, BrokerUrl, Destination, KeySource,
};
use backstop_core::store::CountsParams;
use futures_util::StreamExt;
use serde::Serialize;
use std::future::Future;
use std::time::{Duration, Instant};

/// How long one phase (connecting, filling, draining, the bridge, the target) may wait on the
/// broker before the bench gives up with an error naming it. Tansu, the Kafka-protocol test
/// broker, consumes a few thousand messages a second, so 20,000 take seconds, not minutes.
const PHASE_LIMIT: Duration = Duration::from_secs(600);

/// One channel of one broker: how its queues are made, addressed and removed. [`measure`]
/// does the rest, the same for every channel.
trait Broker {
    /// The channel's name in the report.
    fn channel(&self) -> &'static str;
    /// The broker's URL.
    fn url(&self) -> &str;
    /// A fresh source for the measurement `what` (`raw`, `bridge`, `raw-out`, `target`),
    /// made on the broker now when a consumer cannot make it itself (a Kafka topic, a
    /// JetStream stream).
    async fn source(&self, what: &str) -> Result<BridgeSource>;
    /// Where a publisher puts the messages that `source`'s consumer reads.
    fn destination(&self, source: &BridgeSource) -> Destination;
    /// Removes `bridge`'s source and what it still holds.
    async fn remove(&self, bridge: &BridgeConfig) -> Result<()> {
        within("deleting the source", delete_source(bridge)).await??;
        Ok(())
    }
}

/// `f`, or an error naming `what` once [`PHASE_LIMIT`] has passed.
async fn within<T>(what: &str, f: impl Future<Output = T>) -> Result<T> {
    tokio::time::timeout(PHASE_LIMIT, f)
        .await
        .map_err(|_| anyhow::anyhow!("{what}: no answer from the broker in {PHASE_LIMIT:?}"))
}

/// One channel's four figures.
#[derive(Serialize)]
struct Channel {
    channel: &'static str,
    raw_consume_per_s: f64,
    bridge_per_s: f64,
    bridge_over_raw: f64,
    raw_publish_per_s: f64,
    target_per_s: f64,
    target_over_raw: f64,
}

#[derive(Serialize)]
struct Report {
    messages: usize,
    prefetch: u16,
    concurrency: usize,
    durability: &'static str,
    channels: Vec<Channel>,
}

pub async fn run(a: BrokersBenchArgs) -> Result<()> {
    if a.messages == 0 || a.concurrency == 0 || a.prefetch == 0 {
        bail!("--messages, --concurrency and --prefetch must be at least 1");
    }
    if a.amqp.is_none() && a.redis.is_none() && a.kafka.is_none() && a.nats.is_none() {
        bail!(
            "give the brokers to measure: one or more of --amqp amqp://guest:guest@127.0.0.1:5672/%2f, --redis redis://127.0.0.1:6379/0, --kafka kafka://127.0.0.1:9092, --nats nats://127.0.0.1:4222"
        );
    }
    let mut channels = Vec::new();
    let run = uuid_like();
    if let Some(url) = &a.amqp {
        channels.push(measure(&rabbitmq::Queue::new(url, &run), &a).await?);
    }
    if let Some(url) = &a.redis {
        channels.push(measure(&redis::List::new(url, &run), &a).await?);
        channels.push(measure(&redis::Stream::new(url, &run), &a).await?);
    }
    if let Some(url) = &a.kafka {
        expect_kind(url, "--kafka", BrokerKind::Kafka)?;
        channels.push(measure(&kafka::Topic::new(url, &run)?, &a).await?);
    }
    if let Some(url) = &a.nats {
        expect_kind(url, "--nats", BrokerKind::Nats)?;
        let nats = nats::Streams::connect(url, &run, a.prefetch).await?;
        let measured = measure(&nats, &a).await;
        // The streams a failed run left behind, deleted too (after a whole run, none is).
        nats.delete_left().await;
        channels.push(measured?);
    }
    let r = Report {
        messages: a.messages,
        prefetch: a.prefetch,
        concurrency: a.concurrency,
        durability: "sqlite synchronous=FULL; persistent AMQP messages; Kafka acks=all (idempotent producer); JetStream file storage",
        channels,
    };
    if a.json {
        return print_json(&r);
    }
    println!(
        "messages: {}  prefetch: {}  concurrency: {}",
        r.messages, r.prefetch, r.concurrency
    );
    for c in &r.channels {
        println!(
            "{}: raw consume {:.0}/s, bridge {:.0}/s ({:.2} of raw); raw confirmed publish {:.0}/s, target {:.0}/s ({:.2} of raw)",
            c.channel,
            c.raw_consume_per_s,
            c.bridge_per_s,
            c.bridge_over_raw,
            c.raw_publish_per_s,
            c.target_per_s,
            c.target_over_raw
        );
    }
    Ok(())
}

/// Refuses a URL given to the wrong flag (`--kafka nats://…`) before anything is made.
fn expect_kind(url: &str, flag: &str, kind: BrokerKind) -> Result<()> {
    let shown = BrokerUrl::new(url).redacted();
    match check_url(url) {
        Ok(k) if k == kind => Ok(()),
        Ok(k) => bail!("{flag} {shown}: a {k:?} URL, not {kind:?}"),
        Err(e) => bail!("{flag}: {e}"),
    }
}

fn uuid_like() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() ^ jiff::Timestamp::now().as_nanosecond() as u128
    )
}

fn bridge(url: &str, source: BridgeSource, prefetch: u16) -> BridgeConfig {
    BridgeConfig {
        name: "bench".into(),
        broker: BrokerUrl::new(url),
        source,
        kind: "bench.in".into(),
        key: KeySource::Pointer("/id".into()),
        prefetch,
        dead_letters: false,
        max_message: 1 << 16,
    }
}

fn body(i: usize) -> Vec<u8> {
    format!(r#"{{"id":"m-{i}","to":"+8613800000000","text":"your code is {i}"}}"#).into_bytes()
}

/// Puts `n` messages where `source` is, `c` publishes in flight; returns messages per second.
async fn fill(url: &str, destination: Destination, n: usize, c: usize) -> Result<f64> {
    let p = publisher(&BrokerTarget {
        broker: BrokerUrl::new(url),
        destination,
    });
    let started = Instant::now();
    let bodies: Vec<Vec<u8>> = (0..n).map(body).collect();
    let ids: Vec<String> = (0..n).map(|i| format!("m-{i}")).collect();
    let mut results = futures_util::stream::iter(0..n)
        .map(|i| {
            let p = &p;
            let (id, body) = (&ids[i], &bodies[i]);
            async move {
                p.publish(
                    Outgoing {
                        id,
                        kind: "bench",
                        key: id,
                        attempt: 1,
                        traceparent: None,
                        body,
                        since_enqueued: std::time::Duration::ZERO,
                    },
                    Duration::from_secs(30),
                )
                .await
            }
        })
        .buffer_unordered(c);
    while let Some(r) = results.next().await {
        if !r.is_confirmed() {
            bail!("a publish was not confirmed: {r:?}");
        }
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// The four figures of one channel (see the module's doc), each on sources of its own.
async fn measure(b: &impl Broker, a: &BrokersBenchArgs) -> Result<Channel> {
    let (n, url, channel) = (a.messages, b.url(), b.channel());
    // 1. The raw consume ceiling: the same consumer, acking each batch, no ledger.
    let raw = bridge(url, b.source("raw").await?, a.prefetch);
    let mut consumer = within("connecting the raw consumer", connect_consumer(&raw))
        .await?
        .context("connecting the raw consumer")?;
    fill(url, b.destination(&raw.source), n, a.concurrency).await?;
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + PHASE_LIMIT;
    let mut got = 0;
    while got < n {
        // A consumer waits for messages that may never come (a broker that lost them, one
        // that stalled): the deadline bounds the whole drain, not each batch.
        let Ok(batch) =
            tokio::time::timeout_at(deadline, consumer.next_batch(usize::from(a.prefetch))).await
        else {
            bail!("{channel}: the raw consumer took {got} of {n} messages in {PHASE_LIMIT:?}");
        };
        let batch = batch?;
        got += batch.len();
        within(
            "acking",
            consumer.ack(batch.iter().map(|m| m.token).collect()),
        )
        .await??;
    }
    // Every ack confirmed, for a broker that confirms them later (JetStream).
    within("confirming acks", consumer.settle_acks()).await??;
    let raw_consume = n as f64 / started.elapsed().as_secs_f64();
    drop(consumer);
    b.remove(&raw).await?;

    // 2. The bridge: every message a committed task before its ack.
    let dir = TempDir::new("bench-brokers")?;
    let store = open_store(&dir.sqlite_url()).await?;
    let bridged = bridge(url, b.source("bridge").await?, a.prefetch);
    // Created (and filled) before the bridge runs, so the figure is the drain alone.
    drop(within("connecting a consumer", connect_consumer(&bridged)).await??);
    fill(url, b.destination(&bridged.source), n, a.concurrency).await?;
    let engine = Engine::builder(store.clone())
        .kind(KindConfig::new("bench.in", Target::Pull))
        .bridge(bridged.clone())
        .options(EngineOptions {
            bridge_beat: Duration::from_millis(200),
            ..Default::default()
        })
        .build()?;
    let started = Instant::now();
    let (stop, runner) = super::run_engine(&engine);
    while engine.bridges()[0].inserted < n as u64 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        if started.elapsed() > PHASE_LIMIT {
            bail!(
                "{channel}: the bridge did not take {n} messages in {PHASE_LIMIT:?}: {:?}",
                engine.bridges()
            );
        }
    }
    let bridge_rate = n as f64 / started.elapsed().as_secs_f64();
    let _ = stop.send(());
    runner.await?;
    b.remove(&bridged).await?;

    // 3. The raw confirmed-publish ceiling (to a queue that exists: mandatory publishes).
    let out = bridge(url, b.source("raw-out").await?, a.prefetch);
    drop(within("connecting a consumer", connect_consumer(&out)).await??);
    let raw_publish = fill(url, b.destination(&out.source), n, a.concurrency).await?;
    b.remove(&out).await?;

    // 4. The target: tasks enqueued first, then published by the engine.
    let target = bridge(url, b.source("target").await?, a.prefetch);
    drop(within("connecting a consumer", connect_consumer(&target)).await??);
    let mut kind = KindConfig::new(
        "bench.out",
        Target::Broker(BrokerTarget {
            broker: BrokerUrl::new(url),
            destination: b.destination(&target.source),
        }),
    );
    kind.concurrency = a.concurrency;
    let engine = Engine::builder(store.clone()).kind(kind).build()?;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let rs = chunk
            .iter()
            .map(|i| EnqueueRequest {
                kind: "bench.out".into(),
                key: format!("t-{i}"),
                payload: body(*i),
                ..Default::default()
            })
            .collect();
        for r in engine.enqueue_many(rs).await? {
            r?;
        }
    }
    let started = Instant::now();
    let (stop, runner) = super::run_engine(&engine);
    // Waits on the backlog (unfinished rows only): counting every status each few ms would
    // scan the finished rows and make the wait itself a cost of the measured run.
    loop {
        let open = super::ledger::open_tasks(&*store, "bench.out").await?;
        if open == 0 {
            break;
        }
        if started.elapsed() > PHASE_LIMIT {
            bail!("{channel}: the target left {open} of {n} tasks unfinished in {PHASE_LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let target_rate = n as f64 / started.elapsed().as_secs_f64();
    let c = store
        .counts(CountsParams {
            kind: Some("bench.out".into()),
        })
        .await?;
    if c.succeeded as usize != n {
        bail!(
            "{channel}: {} of {n} publishes succeeded ({} failed for good)",
            c.succeeded,
            c.failed
        );
    }
    let _ = stop.send(());
    runner.await?;
    b.remove(&target).await?;
    Ok(Channel {
        channel,
        raw_consume_per_s: raw_consume,
        bridge_per_s: bridge_rate,
        bridge_over_raw: bridge_rate / raw_consume,
        raw_publish_per_s: raw_publish,
        target_per_s: target_rate,
        target_over_raw: target_rate / raw_publish,
    })
}
