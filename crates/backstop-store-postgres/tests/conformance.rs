//! The conformance suite on PostgreSQL: each case on a fresh schema of the server named by
//! `BACKSTOP_TEST_POSTGRES_URL`; without it, each case says `skipped:` and passes.

mod common;

use backstop_core::Store;
use common::SchemaGuard;
use std::sync::Arc;

async fn fresh() -> (Arc<dyn Store>, SchemaGuard) {
    let guard = SchemaGuard::new();
    let store = guard.store().await;
    (Arc::new(store), guard)
}

backstop_store_tests::conformance_suite!(fresh, skip_if = common::skip());
