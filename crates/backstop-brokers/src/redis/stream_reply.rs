//! Stream replies read as bytes: redis-rs's `StreamId` keeps fields in a `HashMap<String, _>`
//! (order lost, a non-UTF-8 field name an error) and skips the nil of a deleted entry.

use redis::{ErrorKind, RedisError, RedisResult, Value, from_redis_value};

/// An entry's fields, in order, as bytes.
pub(crate) type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// One stream entry; `fields` is `None` for an entry deleted while pending.
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) fields: Option<Fields>,
}

/// `XAUTOCLAIM`'s reply.
pub(crate) struct AutoClaim {
    /// Where the next scan starts; `0-0` once the whole pending list was scanned.
    pub(crate) next: String,
    pub(crate) claimed: Vec<Entry>,
    /// Redis 7 names entries that were pending but deleted (and drops them from the PEL);
    /// Redis 6.2 answers nil in `claimed` instead.
    pub(crate) deleted: Vec<String>,
}

fn unexpected(what: &'static str) -> RedisError {
    RedisError::from((ErrorKind::UnexpectedReturnType, what))
}

fn entry(v: Value) -> RedisResult<Option<Entry>> {
    let Some((id, flat)): Option<(String, Option<Vec<Vec<u8>>>)> = from_redis_value(v)? else {
        return Ok(None);
    };
    let fields = flat.map(|flat| {
        let mut it = flat.into_iter();
        std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect()
    });
    Ok(Some(Entry { id, fields }))
}

fn entries(v: Value) -> RedisResult<Vec<Entry>> {
    let Value::Array(items) = v else {
        return Err(unexpected("stream entries are not an array"));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        out.extend(entry(item)?);
    }
    Ok(out)
}

/// `XREADGROUP` of one stream: nil when a block timed out, else `[[stream, entries]]`
/// (RESP2) or `{stream: entries}` (RESP3).
pub(crate) fn read_group(v: Value) -> RedisResult<Vec<Entry>> {
    let per_stream = match v {
        Value::Nil => return Ok(Vec::new()),
        Value::Array(rows) => rows
            .into_iter()
            .map(|row| match row {
                Value::Array(mut kv) if kv.len() == 2 => Ok(kv.pop().expect("two")),
                _ => Err(unexpected("XREADGROUP row is not [stream, entries]")),
            })
            .collect::<RedisResult<Vec<_>>>()?,
        Value::Map(kv) => kv.into_iter().map(|(_, v)| v).collect(),
        _ => return Err(unexpected("XREADGROUP reply is not an array")),
    };
    let mut out = Vec::new();
    for v in per_stream {
        out.extend(entries(v)?);
    }
    Ok(out)
}

/// `XAUTOCLAIM`: `[next, claimed]` (Redis 6.2) or `[next, claimed, deleted]` (Redis 7).
pub(crate) fn autoclaim(v: Value) -> RedisResult<AutoClaim> {
    let Value::Array(items) = v else {
        return Err(unexpected("XAUTOCLAIM reply is not an array"));
    };
    let mut items = items.into_iter();
    let (Some(next), Some(claimed)) = (items.next(), items.next()) else {
        return Err(unexpected(
            "XAUTOCLAIM reply is not [next, claimed, deleted]",
        ));
    };
    let deleted = match items.next() {
        Some(d) => from_redis_value(d)?,
        None => Vec::new(),
    };
    Ok(AutoClaim {
        next: from_redis_value(next)?,
        claimed: entries(claimed)?,
        deleted,
    })
}
