//! Redis: a reliable list (`BLMOVE` into a processing list, `LREM` after commit), a stream
//! read through a consumer group (`XACK` after commit, `XAUTOCLAIM` of idle entries), and a
//! publisher to a list (`LPUSH`) or a stream (`XADD`).

mod connection;
pub(crate) mod list;
pub(crate) mod publisher;
pub(crate) mod stream;
mod stream_message;
mod stream_reply;
