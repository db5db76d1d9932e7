//! The reconciler's leader killed mid-pass on PostgreSQL (see `reconciler_crash/mod.rs`).
//!
//! Needs `BACKSTOP_TEST_POSTGRES_URL`; without it the test says `skipped:` and passes.

mod common;
mod reconciler_crash;

use common::db::Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_leader_finishes_a_killed_leaders_pass_on_postgres() {
    reconciler_crash::a_leader_killed_mid_pass_leaves_the_rest_to_the_next(Server::Postgres).await;
}
