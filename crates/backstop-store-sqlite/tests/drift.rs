//! A drift written behind the store's back, with a plain connection to the ledger's file,
//! is found by the conservation audit.

use backstop_core::Store;
use backstop_store_sqlite::SqliteStore;
use sqlx::sqlite::SqlitePool;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_drift_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drift.db");
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&path.display().to_string())
            .await
            .unwrap(),
    );
    let url = format!("sqlite://{}", path.display());
    backstop_store_tests::cases::an_injected_drift_is_found(store, move |id| {
        Box::pin(async move {
            let pool = SqlitePool::connect(&url).await.unwrap();
            sqlx::query("UPDATE backstop_tasks SET attempts = attempts + 1 WHERE id = ?")
                .bind(id.0.as_bytes().to_vec())
                .execute(&pool)
                .await
                .unwrap();
        })
    })
    .await;
}
