//! The schema: migrations, and the check that the ledger takes writes.

use super::{BoxFuture, StoreError};

/// The ledger's schema and its fitness for writes (`backstop migrate`, readiness, `serve` at
/// start).
pub trait Migrations: Send + Sync {
    /// Applies pending schema migrations; idempotent.
    fn migrate(&self) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Checks that a write could be committed now, and writes nothing: one transaction that
    /// takes the write path (the write lock, a row in the ledger's tables that needs new
    /// space) and is rolled back. For readiness and for `serve` at start: `Unavailable` when
    /// the ledger cannot take writes (unreachable, full, read-only, locked), another error
    /// when it answers but is not in order (not migrated).
    fn check_writable(&self) -> BoxFuture<'_, Result<(), StoreError>>;
}
