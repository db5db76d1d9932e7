//! A Redis list consumed reliably: each item is moved into a processing list and removed from
//! it only once its task is committed; on connect the processing list is read first.
//!
//! Producers `LPUSH`; `BLMOVE list processing RIGHT LEFT` takes the oldest item and keeps it
//! in `processing` in the same step, so a crash between the move and the commit leaves it
//! there for the next connect. One bridge owns its processing list: two consumers sharing
//! one would each hand out the other's items on connect (a duplicate, never a loss).

use super::connection::{self, BLOCK, failed};
use crate::{AckToken, BoxFuture, BrokerError, Consumer, Received};
use backstop_core::broker::BrokerUrl;
use redis::aio::MultiplexedConnection;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A connected list consumer.
pub(crate) struct ListConsumer {
    url: BrokerUrl,
    list: String,
    processing: String,
    /// Short commands: `LRANGE`, `LMOVE`, `LREM`.
    conn: MultiplexedConnection,
    /// `BLMOVE` only, with a response timeout longer than its block.
    blocking: MultiplexedConnection,
    /// Items found in `processing` and not handed out yet, oldest first.
    recovered: VecDeque<Vec<u8>>,
    /// Set while `next_batch` runs. Still set when it is called again means the last call
    /// was dropped mid-way, and an item it moved may sit in `processing` unseen.
    busy: bool,
    /// Items handed out and not acknowledged, by token.
    outstanding: HashMap<AckToken, Vec<u8>>,
    next_token: u64,
}

/// Connects and recovers `processing` first.
pub(crate) async fn connect(
    url: &BrokerUrl,
    list: &str,
    processing: &str,
) -> Result<ListConsumer, BrokerError> {
    let mut conn = connection::open(url, false).await?;
    connection::check_type(&mut conn, list, "list").await?;
    connection::check_type(&mut conn, processing, "list").await?;
    let mut consumer = ListConsumer {
        url: url.clone(),
        list: list.to_string(),
        processing: processing.to_string(),
        blocking: connection::open(url, true).await?,
        conn,
        recovered: VecDeque::new(),
        busy: false,
        outstanding: HashMap::new(),
        next_token: 0,
    };
    consumer.rescan().await?;
    Ok(consumer)
}

impl ListConsumer {
    /// Reads `processing` into `recovered`, less what is handed out and not acknowledged.
    async fn rescan(&mut self) -> Result<(), BrokerError> {
        let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(&self.processing)
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn)
            .await
            .map_err(|e| failed(format!("LRANGE {:?}", self.processing), e))?;
        let mut held: HashMap<&[u8], usize> = HashMap::new();
        for item in self.outstanding.values() {
            *held.entry(item).or_default() += 1;
        }
        // Moves push at the left, so the oldest item is the rightmost.
        let recovered = items
            .into_iter()
            .rev()
            .filter(|item| match held.get_mut(item.as_slice()) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    false
                }
                _ => true,
            })
            .collect();
        self.recovered = recovered;
        Ok(())
    }

    /// Recovered items first; otherwise waits for one new item, then takes up to `max - 1`
    /// more without waiting, so that batches form under load.
    async fn take(&mut self, max: usize) -> Result<Vec<Received>, BrokerError> {
        if !self.recovered.is_empty() {
            let n = max.min(self.recovered.len());
            let items: Vec<_> = self.recovered.drain(..n).collect();
            return Ok(items.into_iter().map(|i| self.received(i, true)).collect());
        }
        let first = loop {
            let item: Option<Vec<u8>> = redis::cmd("BLMOVE")
                .arg(&self.list)
                .arg(&self.processing)
                .arg("RIGHT")
                .arg("LEFT")
                .arg(BLOCK.as_secs_f64())
                .query_async(&mut self.blocking)
                .await
                .map_err(|e| failed(format!("BLMOVE {:?}", self.list), e))?;
            if let Some(item) = item {
                break item;
            }
        };
        let mut items = vec![first];
        if max > 1 {
            let mut pipe = redis::pipe();
            for _ in 1..max {
                pipe.cmd("LMOVE")
                    .arg(&self.list)
                    .arg(&self.processing)
                    .arg("RIGHT")
                    .arg("LEFT");
            }
            let more: Vec<Option<Vec<u8>>> = pipe
                .query_async(&mut self.conn)
                .await
                .map_err(|e| failed(format!("LMOVE {:?}", self.list), e))?;
            items.extend(more.into_iter().flatten());
        }
        Ok(items.into_iter().map(|i| self.received(i, false)).collect())
    }

    fn received(&mut self, body: Vec<u8>, recovered: bool) -> Received {
        let token = AckToken(self.next_token);
        self.next_token += 1;
        self.outstanding.insert(token, body.clone());
        let mut origin = Map::new();
        origin.insert("broker".into(), Value::from("redis"));
        origin.insert("list".into(), Value::from(self.list.as_str()));
        origin.insert("processing".into(), Value::from(self.processing.as_str()));
        origin.insert("recovered".into(), Value::from(recovered));
        Received {
            body,
            message_id: None,
            message_key: None,
            headers: BTreeMap::new(),
            origin,
            death: None,
            poison: None,
            token,
        }
    }
}

impl Consumer for ListConsumer {
    fn next_batch(&mut self, max: usize) -> BoxFuture<'_, Result<Vec<Received>, BrokerError>> {
        Box::pin(async move {
            if self.busy {
                // The dropped call's BLMOVE may still be waiting on the old connection: a
                // new one, then `processing` read again for what it may have moved.
                self.blocking = connection::open(&self.url, true).await?;
                self.rescan().await?;
            }
            self.busy = true;
            let batch = self.take(max.max(1)).await?;
            self.busy = false;
            Ok(batch)
        })
    }

    fn ack(&mut self, tokens: Vec<AckToken>) -> BoxFuture<'_, Result<(), BrokerError>> {
        Box::pin(async move {
            let mut pipe = redis::pipe();
            let mut any = false;
            for item in tokens.iter().filter_map(|t| self.outstanding.get(t)) {
                // One copy: another item with equal bytes may still be outstanding.
                pipe.cmd("LREM")
                    .arg(&self.processing)
                    .arg(1)
                    .arg(item)
                    .ignore();
                any = true;
            }
            if any {
                pipe.query_async::<()>(&mut self.conn)
                    .await
                    .map_err(|e| failed(format!("LREM {:?}", self.processing), e))?;
            }
            for t in &tokens {
                self.outstanding.remove(t);
            }
            Ok(())
        })
    }
}
