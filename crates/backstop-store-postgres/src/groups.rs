//! Ordering per group ([`backstop_core::group`]): what the store reads of a group in Rust. The
//! rest lives in the database (migration 0013_groups): a grouped row takes its place and is
//! parked by an insert trigger, and every end of a grouped task unparks its group's next task
//! by an update trigger, whichever path (an enqueue, an outbox insert, a completion, rescue,
//! expiry or a manual action) wrote the row.

use crate::row::{task, task_columns};

/// A CTE, `groups`, that locks the groups of the rows of `$src` (a CTE of `seq`s) in group
/// order; a statement that ends those rows refers to it before changing any (`AND (SELECT
/// count(*) FROM groups) >= 0`), so that ending a grouped task, which locks its group (the
/// update trigger of 0013_groups), never takes group locks in another order than an enqueue
/// does (see `complete`).
macro_rules! lock_groups {
    ($src:literal) => {
        concat!(
            "groups AS MATERIALIZED (
    SELECT 1
    FROM (SELECT DISTINCT t.kind, t.grp FROM ",
            $src,
            " JOIN {schema}.tasks AS t ON t.seq = ",
            $src,
            ".seq
          WHERE t.grp IS NOT NULL ORDER BY t.kind, t.grp) AS n
    CROSS JOIN LATERAL (
        SELECT 1 FROM {schema}.task_groups AS g
        WHERE g.kind = n.kind AND g.grp = n.grp
        FOR UPDATE OFFSET 0
    ) AS g
)"
        )
    };
}
use crate::{Db, db_err};
use backstop_core::store::GroupHeadParams;
use backstop_core::{StoreError, Task};
pub(crate) use lock_groups;

/// The condition under which a task `o` holds its group (open: pending, running, or failed
/// where its kind blocks), written as the partial index `tasks_grp_open` has it (0013), so
/// that the planner proves a lookup that states it may use the index.
macro_rules! holds_its_group {
    () => {
        "o.grp IS NOT NULL \
         AND (o.status IN ('pending', 'running') OR (o.status = 'failed' AND NOT o.grp_skip))"
    };
}
pub(crate) use holds_its_group;

/// The first open task of `$1`'s group `$2`, through the partial index of open grouped tasks.
const HEAD: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM {schema}.tasks AS o WHERE o.kind = $1 AND o.grp = $2 AND ",
    holds_its_group!(),
    " ORDER BY o.grp_seq LIMIT 1"
);

/// The task `p`'s group waits for, or `None` when every task of the group has ended.
pub(crate) async fn head(db: &Db, p: &GroupHeadParams) -> Result<Option<Task>, StoreError> {
    sqlx::query(db.schema.sql(HEAD))
        .bind(&p.kind)
        .bind(&p.group)
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(task)
        .transpose()
}

#[cfg(test)]
mod tests {
    use crate::types::Time;
    use crate::{PostgresStore, ScratchSchema};
    use backstop_core::group::PARKED_RUN_AT;
    use backstop_core::store::{GetParams, ManualActions, ManualParams, Tasks};
    use backstop_core::{Status, TaskId};
    use backstop_store_tests::{at, put, task};

    const URL_VAR: &str = "BACKSTOP_TEST_POSTGRES_URL";

    fn manual(id: TaskId) -> ManualParams {
        ManualParams {
            id,
            actor: "alice".into(),
            reason: None,
            max_attempts: None,
            now: at(1),
        }
    }

    /// A parked row holds `backstop_core::group::PARKED_RUN_AT` (the migration writes it as a
    /// literal); canceled, it is no longer parked, so that a manual retry of it is an ordinary
    /// pending task, due at once, not one that reads as parked.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_parked_row_holds_the_parked_instant_until_it_ends() {
        if backstop_store_tests::server::skip_without(URL_VAR) {
            return;
        }
        let url = backstop_store_tests::server::server_url(URL_VAR).expect("the test server");
        let scratch = ScratchSchema::new(&url, "groups").unwrap();
        let store = PostgresStore::open_with(scratch.options()).await.unwrap();
        let grouped = |key: &str| {
            let mut t = task("k", key, "{}");
            t.group = Some("A".into());
            t
        };
        put(&store, grouped("a1")).await;
        let a2 = put(&store, grouped("a2")).await;
        let raw = |id: TaskId| {
            sqlx::query_scalar::<_, Time>(
                store
                    .db
                    .schema
                    .sql("SELECT run_at FROM {schema}.tasks WHERE id = $1"),
            )
            .bind(crate::types::Id(id))
            .fetch_one(&store.db.pool)
        };
        assert_eq!(raw(a2).await.unwrap().0, PARKED_RUN_AT);

        let canceled = store.cancel(manual(a2)).await.unwrap();
        assert_eq!(canceled.status, Status::Compensated);
        let t = store.get(GetParams { id: a2 }).await.unwrap().unwrap();
        assert!(!t.parked, "an ended task is not parked");
        assert_eq!(raw(a2).await.unwrap().0, t.run_at, "its own run_at is back");
        let retried = store.retry(manual(a2)).await.unwrap();
        assert_eq!((retried.status, retried.parked), (Status::Pending, false));
        assert_eq!(raw(a2).await.unwrap().0, at(1));
        store.close().await;
        scratch.drop_all().await.unwrap();
    }
}
