//! The write probe behind readiness: a transaction that takes the write lock and a row that
//! needs new pages, rolled back. It fails as a real write would on a read-only file, a file
//! at its page limit (`max_page_count`) or locked by another process past the busy timeout.
//! Pages are allocated in memory until a commit, so a file system that is full while the
//! file still has room shows only when a commit fails.

use crate::raw::{self, Value};
use backstop_core::StoreError;
use sqlx::SqliteConnection;

/// A row larger than the 8 KiB pages backstop creates: it needs overflow pages, which a full
/// file cannot give.
const PROBE: &str = "
INSERT OR REPLACE INTO backstop_beats (name, owner, at, detail)
VALUES ('backstop.write-probe', '', 0, zeroblob(?1))";

/// Bytes of the probe row: two pages' worth.
const PROBE_BYTES: i64 = 16_384;

pub(crate) async fn check_writable(conn: &mut SqliteConnection) -> Result<(), StoreError> {
    raw::rolled_back(conn, |db| {
        db.prepare(PROBE)?.execute(&[Value::Int(PROBE_BYTES)])?;
        Ok(())
    })
    .await
}
