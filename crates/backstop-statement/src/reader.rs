//! A streaming statement reader over any [`std::io::Read`]: one row at a time, bounded
//! memory whatever the file size.

use crate::column_map::ColumnMap;
use crate::format::StatementFormat;
use crate::reader_csv::CsvRows;
use crate::reader_jsonl::JsonlRows;
use crate::record::Row;
use crate::status::ProviderStatus;
use std::collections::HashMap;
use std::io::{self, Read};

/// How to read a statement.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// CSV or JSON lines.
    pub format: StatementFormat,
    /// Which column holds which part of a record.
    pub columns: ColumnMap,
    /// A provider's own status words, keyed by their normal form
    /// ([`crate::status::normal_form`]); consulted before the built-in vocabulary.
    pub status_aliases: HashMap<String, ProviderStatus>,
}

/// Why a statement cannot be read at all (a bad row is not this: it is a
/// [`crate::MalformedRow`]).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("cannot read the statement: {0}")]
    Io(#[from] io::Error),
    /// The CSV header lacks a column the map needs.
    #[error(
        "the statement's header has no column {missing} (for {field}); it has: {found} (use --map {field}=COLUMN)"
    )]
    MissingColumn {
        /// The record part without a column.
        field: &'static str,
        /// The column name looked for.
        missing: String,
        /// The header's columns, comma-separated.
        found: String,
    },
    /// The CSV header row could not be read.
    #[error("cannot read the statement's header row: {0}")]
    Header(String),
}

/// Counts the bytes read through it, for progress.
#[derive(Debug)]
pub struct CountingReader<R> {
    inner: R,
    count: u64,
}

impl<R> CountingReader<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Self {
        CountingReader { inner, count: 0 }
    }

    /// Bytes read so far.
    pub fn count(&self) -> u64 {
        self.count
    }
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

/// The rows of a statement, read as they are needed.
#[derive(Debug)]
pub enum StatementReader<R: Read> {
    /// A CSV statement.
    Csv(CsvRows<R>),
    /// A JSON-lines statement.
    Jsonl(JsonlRows<R>),
}

impl<R: Read> StatementReader<R> {
    /// Starts reading `input`; a CSV header row is read and checked at once.
    pub fn new(input: R, options: &ReadOptions) -> Result<Self, ReadError> {
        Ok(match options.format {
            StatementFormat::Csv => StatementReader::Csv(CsvRows::new(input, options)?),
            StatementFormat::Jsonl => StatementReader::Jsonl(JsonlRows::new(input, options)),
        })
    }

    /// Bytes consumed from the input so far (read-ahead included).
    pub fn bytes_read(&self) -> u64 {
        match self {
            StatementReader::Csv(r) => r.bytes_read(),
            StatementReader::Jsonl(r) => r.bytes_read(),
        }
    }
}

impl<R: Read> Iterator for StatementReader<R> {
    type Item = Result<Row, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            StatementReader::Csv(r) => r.next(),
            StatementReader::Jsonl(r) => r.next(),
        }
    }
}
