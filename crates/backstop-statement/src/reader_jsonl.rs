//! JSON-lines statements: one object per line, fields named by the column map, and an
//! optional trailer line `{"_trailer":{"count":N,"amount_total":S}}`.
//!
//! Amounts are JSON integers or strings of digits; a JSON number with a fraction or an
//! exponent (`10.5`, `1e3`) is refused, never rounded. Keys are strings or integers.

use crate::column_map::ColumnMap;
use crate::reader::{CountingReader, ReadError, ReadOptions};
use crate::record::{Declared, MalformedRow, RawFields, Row, row_excerpt};
use crate::status::ProviderStatus;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::io::{BufRead, BufReader, Read};

/// The field that marks a trailer line.
pub const TRAILER_FIELD: &str = "_trailer";

/// The rows of a JSON-lines statement.
#[derive(Debug)]
pub struct JsonlRows<R: Read> {
    input: BufReader<CountingReader<R>>,
    buf: Vec<u8>,
    line: u64,
    columns: ColumnMap,
    aliases: HashMap<String, ProviderStatus>,
    data_seen: bool,
    after_trailer: bool,
    done: bool,
}

impl<R: Read> JsonlRows<R> {
    /// Starts reading `input`.
    pub fn new(input: R, options: &ReadOptions) -> Self {
        JsonlRows {
            input: BufReader::with_capacity(256 * 1024, CountingReader::new(input)),
            buf: Vec::with_capacity(1024),
            line: 0,
            columns: options.columns.clone(),
            aliases: options.status_aliases.clone(),
            data_seen: false,
            after_trailer: false,
            done: false,
        }
    }

    /// Bytes consumed from the input so far.
    pub fn bytes_read(&self) -> u64 {
        self.input.get_ref().count()
    }

    fn malformed(&self, key: Option<String>, reason: String) -> Row {
        Row::Malformed(MalformedRow {
            line: self.line,
            key,
            reason,
            excerpt: row_excerpt(&String::from_utf8_lossy(&self.buf)),
        })
    }

    /// Interprets the current line (not blank, line ending removed).
    fn row(&self) -> Row {
        let c = &self.columns;
        let names = [
            Some(c.key.as_str()),
            Some(c.amount.as_str()),
            Some(c.currency.as_str()),
            c.status.as_deref(),
            c.at.as_deref(),
        ];
        let mut de = serde_json::Deserializer::from_slice(&self.buf);
        let picked = match (Pick { names }).deserialize(&mut de).and_then(|p| {
            de.end()?;
            Ok(p)
        }) {
            Ok(p) => p,
            Err(e) => return self.malformed(None, format!("not a JSON object: {e}")),
        };
        if let Some(t) = picked.trailer {
            return self.trailer(t);
        }
        let key = match text(picked.values[0], "key", true) {
            Ok(k) => k,
            Err(reason) => return self.malformed(None, reason),
        };
        let key_text = || key.as_deref().map(str::trim).map(str::to_string);
        if self.after_trailer {
            return self.malformed(key_text(), "data line after the trailer".into());
        }
        if let Some(dup) = picked.duplicate {
            return self.malformed(key_text(), format!("field {dup:?} appears twice"));
        }
        let fields = (|| {
            let required = |i: usize, name: &str, numbers: bool| {
                text(picked.values[i], name, numbers)?.ok_or_else(|| {
                    format!("field {:?} ({name}) is missing", names[i].unwrap_or(""))
                })
            };
            let key = key
                .clone()
                .ok_or_else(|| format!("field {:?} (key) is missing", names[0].unwrap_or("")))?;
            let amount = required(1, "amount", true)?;
            let currency = required(2, "currency", false)?;
            let status = match names[3] {
                None => None,
                Some(_) => Some(required(3, "status", false)?),
            };
            let at = text(picked.values[4], "at", false)?;
            Ok::<_, String>((key, amount, currency, status, at))
        })();
        let (key, amount, currency, status, at) = match fields {
            Ok(f) => f,
            Err(reason) => return self.malformed(key_text(), reason),
        };
        let raw = RawFields {
            key: &key,
            amount: &amount,
            currency: &currency,
            status: status.as_deref(),
            at: at.as_deref(),
        };
        match raw.into_record(self.line, &self.aliases) {
            Ok(r) => Row::Record(r),
            Err(refusal) => self.malformed(refusal.key, refusal.reason),
        }
    }

    fn trailer(&self, raw: &RawValue) -> Row {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Trailer<'a> {
            count: Option<u64>,
            #[serde(borrow)]
            amount_total: Option<&'a RawValue>,
        }
        let bad = |why: String| self.malformed(Some(TRAILER_FIELD.into()), why);
        let t: Trailer = match serde_json::from_str(raw.get()) {
            Ok(t) => t,
            Err(e) => {
                return bad(format!(
                    "trailer must be {{\"count\":N,\"amount_total\":S}} with integers: {e}"
                ));
            }
        };
        let amount_total = match t.amount_total {
            None => None,
            Some(v) => {
                let s = v.get();
                let digits = s.strip_prefix('-').unwrap_or(s);
                match s.parse::<i128>() {
                    Ok(n) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                        Some(n)
                    }
                    _ => return bad(format!("trailer amount_total {s} is not an integer")),
                }
            }
        };
        Row::Trailer(Declared {
            count: t.count,
            amount_total,
        })
    }
}

/// A field's text: a JSON string, or (when `numbers`) a JSON number's literal text. `null`
/// and absence are `None`.
fn text<'a>(
    raw: Option<&'a RawValue>,
    name: &str,
    numbers: bool,
) -> Result<Option<Cow<'a, str>>, String> {
    let Some(raw) = raw else { return Ok(None) };
    let s = raw.get();
    match s.as_bytes().first() {
        Some(b'"') => {
            // Borrowed when there is no escape, owned otherwise.
            match serde_json::from_str::<&str>(s) {
                Ok(b) => Ok(Some(Cow::Borrowed(b))),
                Err(_) => serde_json::from_str::<String>(s)
                    .map(|o| Some(Cow::Owned(o)))
                    .map_err(|e| format!("{name} is not a valid string: {e}")),
            }
        }
        Some(b'n') => Ok(None),
        Some(b'-' | b'0'..=b'9') if numbers => Ok(Some(Cow::Borrowed(s))),
        _ if numbers => Err(format!("{name} must be a string or an integer")),
        _ => Err(format!("{name} must be a string")),
    }
}

/// The values of the wanted fields of one object, borrowed from the line.
struct Picked<'de> {
    values: [Option<&'de RawValue>; 5],
    trailer: Option<&'de RawValue>,
    duplicate: Option<String>,
}

/// Picks the wanted fields (`names`, in the order key, amount, currency, status, at) out of
/// an object, skipping the rest without building them.
struct Pick<'n> {
    names: [Option<&'n str>; 5],
}

impl<'de> DeserializeSeed<'de> for Pick<'_> {
    type Value = Picked<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Pick<'_> {
    type Value = Picked<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Picked {
            values: [None; 5],
            trailer: None,
            duplicate: None,
        };
        while let Some(name) = map.next_key::<FieldName<'de>>()? {
            let name = name.0;
            if name == TRAILER_FIELD {
                out.trailer = Some(map.next_value()?);
                continue;
            }
            match self.names.iter().position(|n| *n == Some(&*name)) {
                Some(i) => {
                    let v: &'de RawValue = map.next_value()?;
                    if out.values[i].replace(v).is_some() {
                        out.duplicate = Some(name.into_owned());
                    }
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// An object key, borrowed from the line unless it has escapes.
struct FieldName<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for FieldName<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FieldName<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(FieldName(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(FieldName(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<R: Read> Iterator for JsonlRows<R> {
    type Item = Result<Row, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            self.buf.clear();
            match self.input.read_until(b'\n', &mut self.buf) {
                Ok(0) => {
                    self.done = true;
                    return None;
                }
                Ok(_) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(ReadError::Io(e)));
                }
            }
            self.line += 1;
            while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
                self.buf.pop();
            }
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let row = self.row();
            match row {
                // A declaration before any data is a header; after data, a trailer.
                Row::Trailer(_) => self.after_trailer = self.data_seen,
                _ => self.data_seen = true,
            }
            return Some(Ok(row));
        }
    }
}
