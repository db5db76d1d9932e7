//! CSV statements: a header row naming the columns, RFC 4180 quoting, and an optional
//! trailer of rows whose key is `#count` or `#amount_total` with the number in the amount
//! column.

use crate::reader::{CountingReader, ReadError, ReadOptions};
use crate::record::{Declared, MalformedRow, RawFields, Row, row_excerpt};
use crate::status::ProviderStatus;
use std::collections::HashMap;
use std::io::Read;

/// The key that marks a trailer row declaring the number of data rows.
pub const TRAILER_COUNT: &str = "#count";
/// The key that marks a trailer row declaring the signed sum of the data rows' amounts.
pub const TRAILER_AMOUNT_TOTAL: &str = "#amount_total";

/// Column positions of the record parts.
#[derive(Debug, Clone, Copy)]
struct Positions {
    key: usize,
    amount: usize,
    currency: usize,
    status: Option<usize>,
    at: Option<usize>,
}

/// The rows of a CSV statement.
#[derive(Debug)]
pub struct CsvRows<R: Read> {
    reader: csv::Reader<CountingReader<R>>,
    at: Positions,
    width: usize,
    record: csv::ByteRecord,
    aliases: HashMap<String, ProviderStatus>,
    data_seen: bool,
    after_trailer: bool,
    done: bool,
}

impl<R: Read> CsvRows<R> {
    /// Reads the header row and finds the mapped columns.
    pub fn new(input: R, options: &ReadOptions) -> Result<Self, ReadError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .buffer_capacity(256 * 1024)
            .from_reader(CountingReader::new(input));
        let header: Vec<String> = match reader.byte_headers() {
            Ok(h) => h
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let s = String::from_utf8_lossy(f);
                    let s = if i == 0 {
                        s.trim_start_matches('\u{feff}')
                    } else {
                        &s
                    };
                    s.trim().to_string()
                })
                .collect(),
            Err(e) => return Err(csv_fatal(e)),
        };
        let find = |field: &'static str, name: &str| -> Result<usize, ReadError> {
            header
                .iter()
                .position(|h| h == name)
                .or_else(|| header.iter().position(|h| h.eq_ignore_ascii_case(name)))
                .ok_or_else(|| ReadError::MissingColumn {
                    field,
                    missing: name.to_string(),
                    found: header.join(","),
                })
        };
        let c = &options.columns;
        let at = Positions {
            key: find("key", &c.key)?,
            amount: find("amount", &c.amount)?,
            currency: find("currency", &c.currency)?,
            status: c.status.as_deref().map(|s| find("status", s)).transpose()?,
            at: match c.at.as_deref() {
                None => None,
                Some(name) => match find("at", name) {
                    Ok(i) => Some(i),
                    Err(e) if c.at_required => return Err(e),
                    Err(_) => None,
                },
            },
        };
        Ok(CsvRows {
            reader,
            at,
            width: header.len(),
            record: csv::ByteRecord::new(),
            aliases: options.status_aliases.clone(),
            data_seen: false,
            after_trailer: false,
            done: false,
        })
    }

    /// Bytes consumed from the input so far.
    pub fn bytes_read(&self) -> u64 {
        self.reader.get_ref().count()
    }

    fn line(&self) -> u64 {
        self.record.position().map_or(0, |p| p.line())
    }

    fn malformed(&self, key: Option<String>, reason: String) -> Row {
        // The row written back as CSV, quotes and all.
        let mut w = csv::WriterBuilder::new()
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(Vec::new());
        let written = w
            .write_byte_record(&self.record)
            .ok()
            .and_then(|_| w.into_inner().ok());
        let mut text = String::from_utf8_lossy(&written.unwrap_or_default()).into_owned();
        if text.ends_with('\n') {
            text.pop();
        }
        Row::Malformed(MalformedRow {
            line: self.line(),
            key,
            reason,
            excerpt: row_excerpt(&text),
        })
    }

    fn field(&self, i: usize) -> Option<&[u8]> {
        self.record.get(i)
    }

    /// Interprets the current record.
    fn row(&self) -> Row {
        let p = self.at;
        let key_bytes = self.field(p.key).unwrap_or_default().trim_ascii();
        if key_bytes == TRAILER_COUNT.as_bytes() || key_bytes == TRAILER_AMOUNT_TOTAL.as_bytes() {
            return self.trailer(key_bytes == TRAILER_COUNT.as_bytes());
        }
        let key_text = || {
            std::str::from_utf8(key_bytes)
                .ok()
                .filter(|k| !k.is_empty())
                .map(str::to_string)
        };
        if self.after_trailer {
            return self.malformed(key_text(), "data row after the trailer".into());
        }
        if self.record.len() != self.width {
            return self.malformed(
                key_text(),
                format!(
                    "expected {} fields as in the header, found {}",
                    self.width,
                    self.record.len()
                ),
            );
        }
        let text = |i: usize, name: &str| -> Result<&str, String> {
            std::str::from_utf8(self.field(i).unwrap_or_default())
                .map_err(|_| format!("{name} is not valid UTF-8"))
        };
        let fields = (|| {
            Ok::<_, String>(RawFields {
                key: text(p.key, "key")?,
                amount: text(p.amount, "amount")?,
                currency: text(p.currency, "currency")?,
                status: p.status.map(|i| text(i, "status")).transpose()?,
                at: p.at.map(|i| text(i, "at")).transpose()?,
            })
        })();
        match fields {
            Err(reason) => self.malformed(key_text(), reason),
            Ok(f) => match f.into_record(self.line(), &self.aliases) {
                Ok(r) => Row::Record(r),
                Err(refusal) => self.malformed(refusal.key, refusal.reason),
            },
        }
    }

    fn trailer(&self, is_count: bool) -> Row {
        let value = std::str::from_utf8(self.field(self.at.amount).unwrap_or_default())
            .unwrap_or("")
            .trim();
        let digits = value.strip_prefix('-').unwrap_or(value);
        let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        let declared = match is_count {
            true => value
                .parse::<u64>()
                .ok()
                .filter(|_| integer)
                .map(|n| Declared {
                    count: Some(n),
                    amount_total: None,
                }),
            false => value
                .parse::<i128>()
                .ok()
                .filter(|_| integer)
                .map(|n| Declared {
                    count: None,
                    amount_total: Some(n),
                }),
        };
        let name = if is_count {
            TRAILER_COUNT
        } else {
            TRAILER_AMOUNT_TOTAL
        };
        match declared {
            Some(d) => Row::Trailer(d),
            None => self.malformed(
                Some(name.to_string()),
                format!("trailer row {name} needs an integer in the amount column"),
            ),
        }
    }
}

fn csv_fatal(e: csv::Error) -> ReadError {
    if e.is_io_error() {
        match e.into_kind() {
            csv::ErrorKind::Io(io) => ReadError::Io(io),
            other => ReadError::Header(format!("{other:?}")),
        }
    } else {
        ReadError::Header(e.to_string())
    }
}

impl<R: Read> Iterator for CsvRows<R> {
    type Item = Result<Row, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.reader.read_byte_record(&mut self.record) {
            Ok(false) => {
                self.done = true;
                None
            }
            Ok(true) => {
                let row = self.row();
                match row {
                    // A declaration before any data is a header; after data, a trailer.
                    Row::Trailer(_) => self.after_trailer = self.data_seen,
                    _ => self.data_seen = true,
                }
                Some(Ok(row))
            }
            Err(e) if e.is_io_error() => {
                self.done = true;
                Some(Err(csv_fatal(e)))
            }
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line());
                Some(Ok(Row::Malformed(MalformedRow {
                    line,
                    key: None,
                    reason: format!("unreadable CSV row: {e}"),
                    excerpt: String::new(),
                })))
            }
        }
    }
}
