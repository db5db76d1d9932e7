//! The conformance suite on MySQL / MariaDB: each case on tables of its own (a fresh prefix)
//! on the server named by `BACKSTOP_TEST_MYSQL_URL`; without it, each case says `skipped:` and
//! passes.

mod common;

use backstop_core::Store;
use common::PrefixGuard;
use std::sync::Arc;

async fn fresh() -> (Arc<dyn Store>, PrefixGuard) {
    let guard = PrefixGuard::new();
    let store = guard.store().await;
    (Arc::new(store), guard)
}

backstop_store_tests::conformance_suite!(fresh, skip_if = common::skip());
