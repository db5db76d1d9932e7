//! Reads: listings and counts.

use crate::fixtures::*;
use backstop_core::store::*;
use backstop_core::{AttemptOutcome, Status};
use std::sync::Arc;

type S = Arc<dyn Store>;

pub async fn list_filters_and_paginates_newest_first(store: S) {
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(
            put(
                &*store,
                task(
                    if i % 2 == 0 { "even" } else { "odd" },
                    &format!("l{i}"),
                    "{}",
                ),
            )
            .await,
        );
    }
    let all = store
        .list(ListParams {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|t| t.id).collect::<Vec<_>>(),
        ids.iter().rev().copied().collect::<Vec<_>>()
    );
    let page1 = store
        .list(ListParams {
            limit: 3,
            ..Default::default()
        })
        .await
        .unwrap();
    let page2 = store
        .list(ListParams {
            limit: 3,
            before: Some(page1[2].id),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        page2.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![ids[3], ids[2], ids[1]]
    );
    let even = store
        .list(ListParams {
            kind: Some("even".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(even.len(), 4);
    let one = store
        .list(ListParams {
            kind: Some("odd".into()),
            key: Some("l3".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(one.iter().map(|t| t.id).collect::<Vec<_>>(), vec![ids[3]]);
    claim(&*store, "odd", "w", 1, at(0)).await;
    let running = store
        .list(ListParams {
            status: Some(Status::Running),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(running.len(), 1);
}

pub async fn counts_cover_every_task_once(store: S) {
    for i in 0..5 {
        put(&*store, task("k", &format!("n{i}"), "{}")).await;
    }
    put(&*store, task("j", "x", "{}")).await;
    let c = claim(&*store, "k", "w", 2, at(0)).await;
    complete(
        &*store,
        vec![completion(
            &c[0],
            Status::Succeeded,
            AttemptOutcome::Succeeded,
            at(1),
        )],
        at(1),
    )
    .await;
    let k = store
        .counts(CountsParams {
            kind: Some("k".into()),
        })
        .await
        .unwrap();
    assert_eq!(
        k,
        StatusCounts {
            pending: 3,
            running: 1,
            succeeded: 1,
            failed: 0,
            compensated: 0
        }
    );
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        6
    );
}
