//! The conformance suite on SQLite: each case on its own database file.

use backstop_core::Store;
use backstop_store_sqlite::SqliteStore;
use std::sync::Arc;

async fn fresh() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&dir.path().join("ledger.db").display().to_string())
        .await
        .expect("open store");
    (Arc::new(store), dir)
}

backstop_store_tests::conformance_suite!(fresh);
