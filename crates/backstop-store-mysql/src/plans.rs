//! The optimizer keeps using the indexes the per-task statements were written for: a full scan
//! there would cost a pass over the ledger per batch. Runs against the server named by
//! `BACKSTOP_TEST_MYSQL_URL` (and passes untested without it), on a few thousand rows so that
//! the optimizer has statistics to go by.

use crate::{MysqlStore, ScratchPrefix};
use backstop_core::store::*;
use backstop_core::{NewTask, TaskId};
use jiff::{SignedDuration, Timestamp};
use sqlx::{AssertSqlSafe, Row};

/// A bound value.
#[derive(Clone)]
enum Bind {
    Int(i64),
    Bytes(Vec<u8>),
}

async fn explain(store: &MysqlStore, sql: &str, binds: &[Bind]) -> (String, String, String) {
    let sql = format!("EXPLAIN {}", store.db.tables.sql(sql));
    let mut q = sqlx::query(AssertSqlSafe(sql));
    for b in binds {
        q = match b {
            Bind::Int(n) => q.bind(*n),
            Bind::Bytes(v) => q.bind(v.clone()),
        };
    }
    let rows = q.fetch_all(&store.db.pool).await.unwrap();
    assert_eq!(rows.len(), 1, "one table, one row of plan");
    let get = |c: &str| {
        rows[0]
            .try_get::<Option<String>, _>(c)
            .unwrap()
            .unwrap_or_default()
    };
    (get("type"), get("key"), get("Extra"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_task_statements_use_their_indexes() {
    let Some(url) = std::env::var("BACKSTOP_TEST_MYSQL_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("skipped: BACKSTOP_TEST_MYSQL_URL is not set");
        return;
    };
    let scratch = ScratchPrefix::new(&url, "plans").unwrap();
    let store = scratch.open().await.unwrap();
    let t0 = Timestamp::UNIX_EPOCH;
    for kind in ["a", "b", "c", "d"] {
        let tasks = (0..1000)
            .map(|i| NewTask {
                id: TaskId::new(),
                kind: kind.into(),
                key: format!("k{i}"),
                payload: b"{}".to_vec(),
                max_attempts: 3,
                run_at: t0 + SignedDuration::from_secs(i),
                expires_at: (i % 3 == 0).then(|| t0 + SignedDuration::from_secs(i)),
                traceparent: None,
                intake: Default::default(),
                origin: None,
                group: None,
            })
            .collect();
        store
            .enqueue(EnqueueParams { tasks, now: t0 })
            .await
            .unwrap();
        store
            .claim(ClaimParams {
                kind: kind.into(),
                limit: 300,
                start: 300,
                owner: "w".into(),
                now: t0 + SignedDuration::from_secs(500),
                lease_until: t0 + SignedDuration::from_secs(900),
                max_attempts: 3,
                on_group_failure: Default::default(),
                per_key: None,
            })
            .await
            .unwrap();
    }
    sqlx::raw_sql(store.db.tables.q("ANALYZE TABLE {tasks}"))
        .execute(&store.db.pool)
        .await
        .unwrap();
    let running = sqlx::query(
        store
            .db
            .tables
            .q("SELECT id, epoch FROM {tasks} WHERE status = 1 ORDER BY seq LIMIT 4"),
    )
    .fetch_all(&store.db.pool)
    .await
    .unwrap();
    let ids: Vec<Bind> = running.iter().map(|r| Bind::Bytes(r.get("id"))).collect();
    let ints = |v: &[i64]| v.iter().map(|n| Bind::Int(*n)).collect::<Vec<_>>();
    let cases: Vec<(String, Vec<Bind>, &str)> = vec![
        (
            crate::claim::PICK.replace("kind = ?", "kind = 'b'"),
            ints(&[600, 10]),
            "due",
        ),
        (
            crate::rescue::RESCUE_PICK.replace("{held}", crate::ended::HELD_COLUMNS),
            ints(&[600, 10]),
            "leased",
        ),
        (
            crate::rescue::EXPIRE_PICK.to_string(),
            ints(&[600, 10]),
            "expiring",
        ),
        (
            format!(
                "{}{}) FOR UPDATE",
                crate::complete::HELD,
                crate::shapes::repeat("?", ", ", 4)
            ),
            ids,
            "task_id",
        ),
        (
            format!(
                "SELECT id FROM {{tasks}} WHERE {}",
                crate::shapes::repeat("(kind = 'a' AND `key` = CONCAT('k', ?))", " OR ", 4)
            ),
            ints(&[1, 2, 3, 4]),
            "kind_key",
        ),
    ];
    let mut wrong = Vec::new();
    for (sql, binds, index) in cases {
        let (access, key, extra) = explain(&store, &sql, &binds).await;
        if key != index || access == "ALL" || access == "index" || extra.contains("filesort") {
            wrong.push(format!("{sql}\n=> type {access}, key {key}, {extra}"));
        }
    }
    store.close().await;
    scratch.drop_all().await.unwrap();
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}
