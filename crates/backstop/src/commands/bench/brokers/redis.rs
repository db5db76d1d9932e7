//! Redis: a reliable list (with its processing list) and a stream read by a consumer group,
//! both keys of the run's own, made by their first write.

use super::Broker;
use anyhow::Result;
use backstop_core::broker::{BridgeSource, Destination};
use std::time::Duration;

/// The run's lists on one Redis.
pub(super) struct List {
    url: String,
    run: String,
}

impl List {
    /// Lists named after run `run` on the Redis at `url`.
    pub(super) fn new(url: &str, run: &str) -> Self {
        List {
            url: url.to_string(),
            run: run.to_string(),
        }
    }
}

impl Broker for List {
    fn channel(&self) -> &'static str {
        "redis list"
    }

    fn url(&self) -> &str {
        &self.url
    }

    async fn source(&self, what: &str) -> Result<BridgeSource> {
        let run = &self.run;
        Ok(BridgeSource::RedisList {
            list: format!("backstop:bench:{run}:{what}"),
            processing: format!("backstop:bench:{run}:{what}:processing"),
        })
    }

    fn destination(&self, source: &BridgeSource) -> Destination {
        match source {
            BridgeSource::RedisList { list, .. } => Destination::RedisList { list: list.clone() },
            _ => unreachable!("a Redis list channel makes lists only"),
        }
    }
}

/// The run's streams on one Redis.
pub(super) struct Stream {
    url: String,
    run: String,
}

impl Stream {
    /// Streams named after run `run` on the Redis at `url`.
    pub(super) fn new(url: &str, run: &str) -> Self {
        Stream {
            url: url.to_string(),
            run: run.to_string(),
        }
    }
}

impl Broker for Stream {
    fn channel(&self) -> &'static str {
        "redis stream"
    }

    fn url(&self) -> &str {
        &self.url
    }

    async fn source(&self, what: &str) -> Result<BridgeSource> {
        Ok(BridgeSource::RedisStream {
            stream: format!("backstop:bench:{}:{what}", self.run),
            group: "backstop".into(),
            consumer: "bench".into(),
            claim_idle: Duration::from_secs(60),
        })
    }

    fn destination(&self, source: &BridgeSource) -> Destination {
        match source {
            BridgeSource::RedisStream { stream, .. } => Destination::RedisStream {
                stream: stream.clone(),
            },
            _ => unreachable!("a Redis stream channel makes streams only"),
        }
    }
}
