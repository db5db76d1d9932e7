//! Publishing to a Redis list (`LPUSH`) or stream (`XADD`): the reply is the confirmation.

use crate::{BoxFuture, Outgoing, Published, Publisher};
use backstop_core::broker::BrokerUrl;
use std::time::Duration;

/// A publisher to one list or stream.
pub(crate) struct RedisPublisher {
    _url: BrokerUrl,
    _to: String,
}

impl RedisPublisher {
    pub(crate) fn list(url: BrokerUrl, list: String) -> Self {
        RedisPublisher {
            _url: url,
            _to: list,
        }
    }
    pub(crate) fn stream(url: BrokerUrl, stream: String) -> Self {
        RedisPublisher {
            _url: url,
            _to: stream,
        }
    }
}

impl Publisher for RedisPublisher {
    fn publish<'a>(&'a self, _m: Outgoing<'a>, _timeout: Duration) -> BoxFuture<'a, Published> {
        Box::pin(async { Published::Permanent("Redis targets are not built yet".into()) })
    }
}
