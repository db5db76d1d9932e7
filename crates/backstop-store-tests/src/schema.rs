//! The schema: migrations.

use crate::fixtures::*;
use backstop_core::store::*;
use jiff::SignedDuration;
use std::sync::Arc;

type S = Arc<dyn Store>;

pub async fn migrate_is_idempotent(store: S) {
    let id = put(&*store, task("k", "m", "{}")).await;
    store.migrate().await.unwrap();
    store.migrate().await.unwrap();
    assert!(
        store.get(GetParams { id }).await.unwrap().is_some(),
        "migrating again keeps the data"
    );
    let _ = SignedDuration::ZERO;
}
