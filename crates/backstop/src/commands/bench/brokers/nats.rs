//! NATS JetStream: a stream of the run's own per measurement (bridges never create
//! streams), taking one subject under the run's prefix `backstop.bench.<run>.`, read by a
//! durable pull consumer that the bridge creates; each stream is deleted once measured.

use super::{Broker, delete_source, within};
use anyhow::{Context as _, Result, bail};
use async_nats::jetstream::{self, stream};
use backstop_core::broker::{BridgeConfig, BridgeSource, Destination, NatsConsumer};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The run's streams on one NATS server.
pub(super) struct Streams {
    url: String,
    run: String,
    prefetch: u16,
    js: jetstream::Context,
    /// Streams made and not deleted yet: what a failed run leaves for [`Streams::delete_left`].
    made: Mutex<Vec<String>>,
}

impl Streams {
    /// Connects to the NATS at `url`, for streams named after run `run` whose consumers let
    /// a bridge of `prefetch` have its deliveries unacknowledged.
    pub(super) async fn connect(url: &str, run: &str, prefetch: u16) -> Result<Self> {
        let client = within(
            "connecting to NATS",
            async_nats::ConnectOptions::new()
                .name("backstop bench")
                .connection_timeout(Duration::from_secs(10))
                .connect(url),
        )
        .await?
        .context("connecting to NATS")?;
        Ok(Streams {
            url: url.to_string(),
            run: run.to_string(),
            prefetch,
            js: jetstream::new(client),
            made: Mutex::new(Vec::new()),
        })
    }

    fn made(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.made.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Deletes the streams not deleted yet, saying on stderr which could not be.
    pub(super) async fn delete_left(&self) {
        let left = std::mem::take(&mut *self.made());
        for name in left {
            if let Err(e) = within("deleting a NATS stream", self.js.delete_stream(&name)).await {
                eprintln!("NATS stream {name:?} left behind: {e:#}");
            }
        }
    }
}

impl Broker for Streams {
    fn channel(&self) -> &'static str {
        "nats"
    }

    fn url(&self) -> &str {
        &self.url
    }

    async fn source(&self, what: &str) -> Result<BridgeSource> {
        // Stream names take no `.`; the run's token (`pid-nanos`) and `what` have none.
        let name = format!("BACKSTOP_BENCH_{}_{what}", self.run);
        let subject = format!("backstop.bench.{}.{what}", self.run);
        let creating = format!("creating NATS stream {name:?}");
        within(
            &creating,
            self.js.create_stream(stream::Config {
                name: name.clone(),
                subjects: vec![subject.clone()],
                storage: stream::StorageType::File,
                ..Default::default()
            }),
        )
        .await?
        .with_context(|| creating.clone())?;
        self.made().push(name.clone());
        Ok(BridgeSource::NatsStream(NatsConsumer {
            stream: name,
            consumer: "bench".into(),
            subject: Some(subject),
            // Long enough that nothing is delivered twice while a batch waits on the ledger.
            ack_wait: Duration::from_secs(30),
            max_deliver: -1,
            // Room for four bridge batches: JetStream stops delivering at this bound, so a
            // bound near the prefetch would measure the wait for acks, not the bridge.
            max_ack_pending: i64::from(self.prefetch) * 4,
        }))
    }

    fn destination(&self, source: &BridgeSource) -> Destination {
        match source {
            BridgeSource::NatsStream(c) => Destination::NatsSubject {
                subject: c
                    .subject
                    .clone()
                    .expect("the bench's streams have a subject"),
            },
            _ => unreachable!("a NATS channel makes streams only"),
        }
    }

    async fn remove(&self, bridge: &BridgeConfig) -> Result<()> {
        let BridgeSource::NatsStream(c) = &bridge.source else {
            bail!("a NATS channel makes streams only");
        };
        within("deleting a NATS stream", delete_source(bridge)).await??;
        self.made().retain(|s| *s != c.stream);
        Ok(())
    }
}
