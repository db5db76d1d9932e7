//! A full disk must not disable the store for the rest of the process: once the file can grow
//! again, every write works again, on the same `SqliteStore`. The disk is "full" through the
//! writer's page limit (`PRAGMA max_page_count`), which needs no root and no real disk.

use backstop_core::store::*;
use backstop_core::{Status, StoreError};
use backstop_store_sqlite::{SqliteOptions, SqliteStore};
use backstop_store_tests::{at, claim, put, succeed_next, t0, task};

fn leadership(now: i64) -> LeadershipParams {
    LeadershipParams {
        name: "reconciler".into(),
        owner: "node-a".into(),
        now: at(now),
        until: at(now + 30),
    }
}

fn big_transition(n: usize) -> TransitionParams {
    // Ids longer than a page: the rows need new overflow pages, which a full file lacks.
    TransitionParams {
        machine: "order".into(),
        entity_id: format!("{n}-{}", "x".repeat(20_000)),
        to: "paid".into(),
        event_id: format!("e{n}-{}", "y".repeat(20_000)),
        version: None,
        allowed_from: vec!["new".into()],
        initial: "new".into(),
        now: t0(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_does_not_disable_the_writer_once_space_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(SqliteOptions::new(dir.path().join("full.db")))
        .await
        .unwrap();
    let s: &dyn Store = &store;

    // Before the disk fills: four running tasks, one finished.
    for key in ["a", "b", "c", "d"] {
        put(s, task("k", key, "{}")).await;
    }
    let held = claim(s, "k", "w1", 4, t0()).await;
    assert_eq!(held.len(), 4);
    let lease = |i: usize| LeaseRef {
        id: held[i].id,
        epoch: held[i].epoch,
    };
    put(s, task("done", "e", "{}")).await;
    succeed_next(s, "done", t0(), t0(), t0()).await;

    // The disk fills: the file may not grow past its size now (SQLite raises a lower cap to
    // the current size), and enqueues fill what room is left in its pages.
    store.set_max_page_count(Some(1)).await.unwrap();
    let mut full = None;
    for i in 0..10_000 {
        let r = s
            .enqueue(EnqueueParams {
                tasks: vec![task("fill", &format!("f{i}"), &"z".repeat(4000))],
                now: t0(),
            })
            .await;
        if let Err(e) = r {
            full = Some(e);
            break;
        }
    }
    let full = full.expect("the capped file fills up");
    assert!(matches!(full, StoreError::Unavailable(_)), "{full}");

    // A write in a transaction of its own meets the full disk; SQLite rolls it back by itself.
    let e = s.transition_entity(big_transition(1)).await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e}");
    assert!(e.to_string().contains("full"), "{e}");
    // Still full: the same answer, not a broken connection; the write probe says so too.
    let e = s.transition_entity(big_transition(2)).await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e}");
    let e = s.check_writable().await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e}");

    // Space comes back: every writer path works again in this process.
    store.set_max_page_count(None).await.unwrap();
    s.check_writable().await.expect("writable again");
    let l = s
        .acquire_leadership(leadership(1))
        .await
        .expect("leadership");
    assert_eq!(l.owner, "node-a");
    let lost = s
        .heartbeat(HeartbeatParams {
            owner: "w1".into(),
            leases: vec![lease(0)],
            lease_until: at(40),
            now: at(10),
        })
        .await
        .expect("heartbeat");
    assert!(lost.is_empty(), "{lost:?}");
    let released = s
        .release(ReleaseParams {
            leases: vec![lease(1)],
            worker: "w1".into(),
            now: at(11),
        })
        .await
        .expect("release");
    assert_eq!(released, 1);
    let rescued = s
        .rescue(RescueParams {
            now: at(100),
            limit: 10,
        })
        .await
        .expect("rescue");
    assert_eq!(rescued.len(), 3, "{rescued:?}");
    let cancelled = s
        .cancel(ManualParams {
            id: held[1].id,
            actor: "ops".into(),
            reason: Some("drill".into()),
            max_attempts: None,
            now: at(101),
        })
        .await
        .expect("manual cancel");
    assert_eq!(cancelled.status, Status::Compensated);
    let pruned = s
        .prune(PruneParams {
            status: Prunable::Succeeded,
            before: at(1000),
            limit: 10,
        })
        .await
        .expect("retention");
    assert_eq!(pruned, 1);
    let decided = s
        .transition_entity(big_transition(3))
        .await
        .expect("entity");
    assert_eq!(decided.entity.state, "paid");
    s.beat(BeatParams {
        name: "node:node-a".into(),
        owner: "node-a".into(),
        at: at(102),
        detail: "{}".into(),
    })
    .await
    .expect("beat");
    put(s, task("k", "after", "{}")).await;
}
