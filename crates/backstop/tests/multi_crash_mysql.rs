//! Three `backstop serve` processes on one MySQL/MariaDB table prefix deliver 10,000 HTTP-push
//! tasks; one is SIGKILLed mid-run; every task ends `succeeded`, delivered under its one
//! idempotency key (see `multi_crash/mod.rs`); and the same with 100 ordering groups, each
//! delivered in its ledger order.
//!
//! Needs `BACKSTOP_TEST_MYSQL_URL`; without it the test says `skipped:` and passes.

mod common;
mod multi_crash;

use common::db::Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_mysql_sigkill_one_loses_nothing() {
    multi_crash::sigkill_one_of_three_loses_nothing(Server::Mysql, multi_crash::Scenario::PLAIN)
        .await;
}

/// 100 ordering groups, one delivery in ten failing: besides losing nothing, each group's
/// tasks reach the target in their ledger order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_mysql_keep_each_group_in_order_through_a_sigkill() {
    multi_crash::sigkill_one_of_three_loses_nothing(Server::Mysql, multi_crash::Scenario::ORDERED)
        .await;
}
