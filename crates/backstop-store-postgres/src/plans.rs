//! The planner keeps reading due tasks in index order for the claims: a sort there costs every
//! due row of the kind per claim. Runs against the server named by `BACKSTOP_TEST_POSTGRES_URL`
//! (and passes untested without it), on a few thousand analysed rows, so that the planner has
//! statistics to go by.

use crate::ScratchSchema;
use crate::claim_limited::{PICK_AFTER, READ};
use crate::types::Time;
use backstop_core::NewTask;
use backstop_core::store::*;
use backstop_store_tests::server::{server_url, skip_without};
use backstop_store_tests::{at, t0, task};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Row};

/// An `EXPLAIN (FORMAT JSON)` row's plan (a `json` value, whose text the row carries).
fn json(row: &PgRow) -> Value {
    let text: String = row.try_get_unchecked(0).expect("the plan");
    serde_json::from_str(&text).expect("a JSON plan")
}

/// The first node of `plan` (itself included, then its sub-plans depth first) that `is` holds.
fn find<'a>(plan: &'a Value, is: &dyn Fn(&Value) -> bool) -> Option<&'a Value> {
    if is(plan) {
        return Some(plan);
    }
    plan["Plans"].as_array()?.iter().find_map(|p| find(p, is))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_claim_reads_due_tasks_in_index_order() {
    const URL_VAR: &str = "BACKSTOP_TEST_POSTGRES_URL";
    if skip_without(URL_VAR) {
        return;
    }
    let url = server_url(URL_VAR).expect("checked above");
    let scratch = ScratchSchema::new(&url, "plans").unwrap();
    let store = scratch.open().await.unwrap();
    // Batches share one run_at: the order among them is seq's alone.
    for batch in 0..4 {
        let tasks = (0..1000)
            .map(|i| NewTask {
                run_at: at(batch),
                ..task(
                    "limited",
                    &format!("k{batch}-{i}"),
                    &format!(r#"{{"tenant_id":"t{}"}}"#, i % 100),
                )
            })
            .collect();
        store
            .enqueue(EnqueueParams { tasks, now: t0() })
            .await
            .unwrap();
    }
    let db = &store.db;
    sqlx::query(db.schema.sql("ANALYZE {schema}.tasks"))
        .execute(&db.pool)
        .await
        .unwrap();
    let now = Time(at(10));
    let explain = |sql: &str| format!("EXPLAIN (FORMAT JSON) {}", db.schema.sql(sql).0);
    let first = sqlx::query(AssertSqlSafe(explain(READ)))
        .bind("limited")
        .bind(now)
        .bind(8_i64)
        .bind(0_i64)
        .bind(true)
        .bind(false)
        .bind(None::<Vec<String>>)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let after = sqlx::query(AssertSqlSafe(explain(PICK_AFTER)))
        .bind("limited")
        .bind(now)
        .bind(32_i64)
        .bind(Time(t0()))
        .bind(500_i64)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let (first, after) = (json(&first), json(&after));
    let first = &first[0]["Plan"];
    let pick = find(first, &|n| n["Subplan Name"] == "CTE due").expect("the pick's CTE");
    for (name, plan) in [("first window", pick), ("next window", &after[0]["Plan"])] {
        assert!(
            find(plan, &|n| n["Node Type"]
                .as_str()
                .is_some_and(|t| t.contains("Sort")))
            .is_none(),
            "the {name} sorts due tasks instead of reading them in index order: {plan:#}"
        );
        assert!(
            find(plan, &|n| n["Index Name"] == "tasks_due").is_some(),
            "the {name} reads tasks_due: {plan:#}"
        );
    }
    drop(store);
    scratch.drop_all().await.unwrap();
}
