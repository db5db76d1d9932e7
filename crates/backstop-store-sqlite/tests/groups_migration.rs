//! Migration 0016 carries a ledger's open groups forward: the index of a group's open tasks
//! is keyed by `grp_live` from then on, so the tasks a ledger already holds must be found by
//! it, or a running task's end would leave the task parked behind it parked for ever.

use backstop_core::store::{GetParams, Tasks};
use backstop_core::{AttemptOutcome, Status, TaskId};
use backstop_store_sqlite::SqliteStore;
use backstop_store_tests::groups::grouped;
use backstop_store_tests::{at, claim, complete, completion, put};
use sqlx::SqlitePool;
use sqlx::sqlite::SqliteConnectOptions;

async fn open(path: &std::path::Path) -> SqliteStore {
    SqliteStore::open(&path.display().to_string())
        .await
        .expect("open and migrate")
}

async fn parked(store: &SqliteStore, id: TaskId) -> bool {
    store
        .get(GetParams { id })
        .await
        .unwrap()
        .expect("the task exists")
        .parked
}

#[tokio::test]
async fn a_ledger_from_before_grp_live_keeps_its_groups_in_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.db");
    let store = open(&path).await;
    // Group A: a1 running, a2 parked behind it. Group B: b1 ended, so nothing holds B.
    put(&store, grouped("a1", "A")).await;
    let a2 = put(&store, grouped("a2", "A")).await;
    put(&store, grouped("b1", "B")).await;
    let running = claim(&store, "k", "w1", 10, at(0)).await;
    let b1 = running.iter().find(|c| c.key == "b1").expect("b1 claimed");
    complete(
        &store,
        vec![completion(
            b1,
            Status::Succeeded,
            AttemptOutcome::Succeeded,
            at(1),
        )],
        at(1),
    )
    .await;
    let a1 = running
        .into_iter()
        .find(|c| c.key == "a1")
        .expect("a1 claimed");
    drop(store);

    // The ledger as a build that knew migrations up to 0015 left it.
    let pool = SqlitePool::connect_with(SqliteConnectOptions::new().filename(&path))
        .await
        .unwrap();
    sqlx::raw_sql(
        "DROP INDEX backstop_tasks_grp_open;
         ALTER TABLE backstop_tasks DROP COLUMN grp_live;
         CREATE INDEX backstop_tasks_grp_open ON backstop_tasks (kind, grp, grp_seq)
             WHERE grp IS NOT NULL AND status <> 2 AND status <> 4;
         DELETE FROM backstop_schema WHERE version = 16;",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = open(&path).await;
    // A new task of A waits behind the open ones; one of B, which nothing holds, does not.
    let a3 = put(&store, grouped("a3", "A")).await;
    let b2 = put(&store, grouped("b2", "B")).await;
    assert!(parked(&store, a3).await, "a3 is parked behind a1 and a2");
    assert!(!parked(&store, b2).await, "B's only earlier task had ended");
    // a1's end lets a2 go, and only a2.
    complete(
        &store,
        vec![completion(
            &a1,
            Status::Succeeded,
            AttemptOutcome::Succeeded,
            at(2),
        )],
        at(2),
    )
    .await;
    assert!(!parked(&store, a2).await, "a1's end unparked a2");
    assert!(parked(&store, a3).await, "a3 still waits for a2");
    let keys: Vec<String> = claim(&store, "k", "w1", 10, at(3))
        .await
        .into_iter()
        .map(|c| c.key)
        .collect();
    let mut keys = keys;
    keys.sort();
    assert_eq!(keys, ["a2", "b2"]);
}
