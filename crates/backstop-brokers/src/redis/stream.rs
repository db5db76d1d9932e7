//! A Redis stream read through a consumer group: `XACK` after commit, this consumer's pending
//! entries read again on connect, entries idle past a bound claimed from other consumers.
//!
//! Order of reading: this consumer's own pending entries (`XREADGROUP … 0`, left by a crash
//! or a lost connection) until none is left, then new entries (`>`, blocking), with an
//! `XAUTOCLAIM` of entries idle past `claim_idle` every `claim_idle / 2` (a consumer that
//! died under another name). Nothing keeps an entry handed out alive: the bridge acks within
//! one ledger commit, far shorter than `claim_idle`; a longer commit means another consumer
//! may claim it too, a duplicate the ledger's key absorbs, never a loss.

use super::connection::{self, BLOCK, failed};
use super::stream_message::{self, Origin};
use super::stream_reply::{self, Entry, Fields};
use crate::{AckToken, BoxFuture, BrokerError, Consumer, Received};
use backstop_core::broker::BrokerUrl;
use redis::aio::MultiplexedConnection;
use redis::streams::StreamPendingCountReply;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// The shortest pause between two `XAUTOCLAIM` scans, whatever `claim_idle` is.
const MIN_CLAIM_EVERY: Duration = Duration::from_millis(50);

/// What to read.
pub(crate) struct StreamSpec<'a> {
    pub(crate) stream: &'a str,
    pub(crate) group: &'a str,
    pub(crate) consumer: &'a str,
    pub(crate) claim_idle: Duration,
}

/// Where a batch came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Never delivered before (`>`).
    New,
    /// This consumer's own pending entries.
    Pending,
    /// Claimed from another consumer by `XAUTOCLAIM`.
    Claimed,
}

/// A connected stream consumer.
pub(crate) struct StreamConsumer {
    url: BrokerUrl,
    stream: String,
    group: String,
    consumer: String,
    claim_idle: Duration,
    /// Short commands: pending reads, `XAUTOCLAIM`, `XPENDING`, `XACK`.
    conn: MultiplexedConnection,
    /// `XREADGROUP … BLOCK` only, with a response timeout longer than its block.
    blocking: MultiplexedConnection,
    /// While this consumer's pending entries are read: the id to read after.
    pending_from: Option<String>,
    /// Where the next `XAUTOCLAIM` scan goes on (`0-0`: from the start).
    claim_cursor: String,
    next_claim: Instant,
    /// Set while `next_batch` runs; still set at the next call means the last call was
    /// dropped mid-way, and what it read sits unseen in this consumer's pending entries.
    busy: bool,
    /// Entry ids handed out and not acknowledged, by token.
    outstanding: HashMap<AckToken, String>,
    next_token: u64,
}

/// Connects, creating the group (and the stream) when missing.
pub(crate) async fn connect(
    url: &BrokerUrl,
    spec: StreamSpec<'_>,
) -> Result<StreamConsumer, BrokerError> {
    let mut conn = connection::open(url, false).await?;
    connection::check_type(&mut conn, spec.stream, "stream").await?;
    // A new group starts at `0`, not `$`: entries added before the bridge first ran (a
    // producer deployed first) become tasks instead of being skipped, unseen. An existing
    // group keeps its own position.
    let created: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(spec.stream)
        .arg(spec.group)
        .arg("0")
        .arg("MKSTREAM")
        .query_async(&mut conn)
        .await;
    match created {
        Err(e) if e.code() != Some("BUSYGROUP") => {
            return Err(failed(format!("XGROUP CREATE {:?}", spec.stream), e));
        }
        _ => {}
    }
    Ok(StreamConsumer {
        url: url.clone(),
        stream: spec.stream.to_string(),
        group: spec.group.to_string(),
        consumer: spec.consumer.to_string(),
        claim_idle: spec.claim_idle,
        blocking: connection::open(url, true).await?,
        conn,
        pending_from: Some("0".into()),
        claim_cursor: "0-0".into(),
        next_claim: Instant::now(),
        busy: false,
        outstanding: HashMap::new(),
        next_token: 0,
    })
}

impl StreamConsumer {
    fn context(&self, command: &str) -> String {
        format!("{command} {:?} group {:?}", self.stream, self.group)
    }

    async fn take(&mut self, max: usize) -> Result<Vec<Received>, BrokerError> {
        loop {
            if let Some(from) = self.pending_from.clone() {
                let entries = self.read(max, None, &from).await?;
                self.pending_from = entries.last().map(|e| e.id.clone());
                let batch = self.hand_out(entries, Source::Pending).await?;
                if !batch.is_empty() {
                    return Ok(batch);
                }
                continue;
            }
            if Instant::now() >= self.next_claim {
                let batch = self.claim(max).await?;
                if !batch.is_empty() {
                    return Ok(batch);
                }
                continue;
            }
            // Blocks no longer than until the next claim is due.
            let wait = self
                .next_claim
                .saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(10), BLOCK);
            let entries = self.read(max, Some(wait), ">").await?;
            if !entries.is_empty() {
                return self.hand_out(entries, Source::New).await;
            }
        }
    }

    /// `XREADGROUP` after `from` (`>`: new entries), blocking on the blocking connection.
    async fn read(
        &mut self,
        max: usize,
        block: Option<Duration>,
        from: &str,
    ) -> Result<Vec<Entry>, BrokerError> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(&self.group)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(max);
        if let Some(block) = block {
            cmd.arg("BLOCK").arg(block.as_millis() as u64);
        }
        cmd.arg("STREAMS").arg(&self.stream).arg(from);
        let conn = match block {
            Some(_) => &mut self.blocking,
            None => &mut self.conn,
        };
        let reply = cmd.query_async(conn).await;
        reply
            .and_then(stream_reply::read_group)
            .map_err(|e| failed(self.context("XREADGROUP"), e))
    }

    /// One step of an `XAUTOCLAIM` scan of entries idle past `claim_idle`; once it has gone
    /// round, the next is due in `claim_idle / 2`.
    async fn claim(&mut self, max: usize) -> Result<Vec<Received>, BrokerError> {
        let reply = redis::cmd("XAUTOCLAIM")
            .arg(&self.stream)
            .arg(&self.group)
            .arg(&self.consumer)
            .arg(self.claim_idle.as_millis() as u64)
            .arg(&self.claim_cursor)
            .arg("COUNT")
            .arg(max)
            .query_async(&mut self.conn)
            .await;
        let claim = reply
            .and_then(stream_reply::autoclaim)
            .map_err(|e| failed(self.context("XAUTOCLAIM"), e))?;
        if !claim.deleted.is_empty() {
            tracing::warn!(
                stream = %self.stream,
                group = %self.group,
                deleted = claim.deleted.len(),
                "pending stream entries were deleted before they were acknowledged"
            );
        }
        self.claim_cursor = claim.next;
        if self.claim_cursor == "0-0" {
            self.next_claim = Instant::now() + (self.claim_idle / 2).max(MIN_CLAIM_EVERY);
        }
        self.hand_out(claim.claimed, Source::Claimed).await
    }

    /// Entries as messages: those already handed out (read again after a dropped call, or
    /// claimed back from ourselves) are left out; pending entries deleted from the stream
    /// are acknowledged, as there is nothing to deliver.
    async fn hand_out(
        &mut self,
        entries: Vec<Entry>,
        source: Source,
    ) -> Result<Vec<Received>, BrokerError> {
        let held: HashSet<&str> = self.outstanding.values().map(String::as_str).collect();
        let mut gone = Vec::new();
        let mut keep = Vec::new();
        for e in entries {
            match e.fields {
                _ if held.contains(e.id.as_str()) => {}
                None => gone.push(e.id),
                Some(fields) => keep.push((e.id, fields)),
            }
        }
        if !gone.is_empty() {
            self.xack(&gone).await?;
        }
        let counts = match source {
            Source::New => vec![1; keep.len()],
            Source::Pending | Source::Claimed => self.delivery_counts(&keep).await?,
        };
        let claimed = source == Source::Claimed;
        let mut out = Vec::with_capacity(keep.len());
        for ((id, fields), count) in keep.into_iter().zip(counts) {
            let token = AckToken(self.next_token);
            self.next_token += 1;
            let spec = Origin {
                stream: &self.stream,
                group: &self.group,
                delivery_count: count,
                claimed,
            };
            out.push(stream_message::received(id.clone(), fields, spec, token));
            self.outstanding.insert(token, id);
        }
        Ok(out)
    }

    /// Each entry's delivery count from `XPENDING` (one pipelined call per entry: ids need
    /// not be adjacent in the pending list).
    async fn delivery_counts(
        &mut self,
        entries: &[(String, Fields)],
    ) -> Result<Vec<u64>, BrokerError> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (id, _) in entries {
            pipe.cmd("XPENDING")
                .arg(&self.stream)
                .arg(&self.group)
                .arg(id)
                .arg(id)
                .arg(1)
                .arg(&self.consumer);
        }
        let replies: Vec<StreamPendingCountReply> = pipe
            .query_async(&mut self.conn)
            .await
            .map_err(|e| failed(self.context("XPENDING"), e))?;
        Ok(replies
            .iter()
            .map(|r| r.ids.first().map_or(1, |p| p.times_delivered as u64))
            .collect())
    }

    async fn xack(&mut self, ids: &[String]) -> Result<(), BrokerError> {
        redis::cmd("XACK")
            .arg(&self.stream)
            .arg(&self.group)
            .arg(ids)
            .query_async::<()>(&mut self.conn)
            .await
            .map_err(|e| failed(self.context("XACK"), e))
    }
}

impl Consumer for StreamConsumer {
    fn next_batch(&mut self, max: usize) -> BoxFuture<'_, Result<Vec<Received>, BrokerError>> {
        Box::pin(async move {
            if self.busy {
                // The dropped call's read may still be blocked on the old connection; what
                // it read is pending for this consumer, so the pending list is read again.
                self.blocking = connection::open(&self.url, true).await?;
                self.pending_from = Some("0".into());
            }
            self.busy = true;
            let batch = self.take(max.max(1)).await?;
            self.busy = false;
            Ok(batch)
        })
    }

    fn ack(&mut self, tokens: Vec<AckToken>) -> BoxFuture<'_, Result<(), BrokerError>> {
        Box::pin(async move {
            let ids: Vec<String> = tokens
                .iter()
                .filter_map(|t| self.outstanding.get(t).cloned())
                .collect();
            if !ids.is_empty() {
                self.xack(&ids).await?;
            }
            for t in &tokens {
                self.outstanding.remove(t);
            }
            Ok(())
        })
    }
}
