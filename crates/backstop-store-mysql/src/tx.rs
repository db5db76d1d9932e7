//! Transactions that are tried again when InnoDB picks them as a deadlock victim or gives up
//! waiting for a lock: under concurrent claims, enqueues and rescues that is expected, and the
//! work is safe to repeat because the transaction was rolled back whole.

use backstop_core::StoreError;
use backstop_core::store::Cause;
use std::time::Duration;

/// How often a transaction is tried in all.
const TRIES: u32 = 6;

/// ER_LOCK_DEADLOCK.
const DEADLOCK: u16 = 1213;
/// ER_LOCK_WAIT_TIMEOUT.
const LOCK_WAIT_TIMEOUT: u16 = 1205;
/// ER_DUP_ENTRY.
pub(crate) const DUPLICATE: u16 = 1062;
/// ER_LOCK_NOWAIT (MySQL; MariaDB answers a `NOWAIT` lock with [`LOCK_WAIT_TIMEOUT`]).
const LOCK_NOWAIT: u16 = 3572;

/// Why a transaction body stopped: a database error (maybe worth another try) or an answer
/// for the caller.
pub(crate) enum Fail {
    Sql(sqlx::Error),
    Store(StoreError),
    /// A row of `{task_groups}` was taken by another transaction (see `groups`): the next
    /// try, at once, locks it before anything else.
    Relock(sqlx::Error),
}

impl From<sqlx::Error> for Fail {
    fn from(e: sqlx::Error) -> Self {
        Fail::Sql(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

/// Which errors a transaction is tried again on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Deadlocks and lock wait timeouts.
    Locks,
    /// Those, and a duplicate key: an enqueue that lost a race for a `(kind, key)` looks
    /// again and finds the winner's row.
    LocksAndDuplicates,
}

/// The store's form of a database error.
pub(crate) fn db_err(e: sqlx::Error) -> StoreError {
    if matches!(e, sqlx::Error::PoolTimedOut) {
        // The driver's error says only that it timed out: this says what that means.
        StoreError::Unavailable(Cause::msg(format!(
            "no connection to the server within {} s (it does not answer, or every \
             connection of the pool is busy)",
            crate::connect::ACQUIRE_TIMEOUT.as_secs()
        )))
    } else if is_unavailable(&e) {
        StoreError::Unavailable(Cause::new(e))
    } else {
        StoreError::Database(Cause::new(e))
    }
}

/// Whether `e` says the server cannot take the request now rather than that the request is
/// wrong: no connection (refused, reset, closed pool), or the server refusing writes or
/// connections: read-only (1290 with `--read-only`, 1836, 1792), a full disk or table (1021,
/// 1114), too many connections (1040), shutting down (1053).
fn is_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        e => error_number(e)
            .is_some_and(|n| matches!(n, 1290 | 1836 | 1792 | 1021 | 1114 | 1040 | 1053)),
    }
}

/// The server's error number (1213, 1062, …), for a database error.
pub(crate) fn error_number(e: &sqlx::Error) -> Option<u16> {
    e.as_database_error()
        .and_then(|d| d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
        .map(|d| d.number())
}

/// Whether `e` says a lock was not granted: held by another transaction that was not waited
/// for (`NOWAIT`), or waited for too long.
pub(crate) fn not_granted(e: &sqlx::Error) -> bool {
    matches!(error_number(e), Some(LOCK_WAIT_TIMEOUT | LOCK_NOWAIT))
}

/// Whether `e` says the transaction lost a race that another try may win.
pub(crate) fn worth_another_try(e: &sqlx::Error, retry: Retry) -> bool {
    match error_number(e) {
        Some(DEADLOCK | LOCK_WAIT_TIMEOUT | LOCK_NOWAIT) => true,
        Some(DUPLICATE) => retry == Retry::LocksAndDuplicates,
        _ => false,
    }
}

/// Runs `$body` (an expression of type `Result<T, Fail>` that uses the connection `$conn`)
/// in a transaction, committing when it is `Ok`; tries again (a bounded number of times,
/// after a short randomised pause) when the database says the transaction lost a lock race.
/// Evaluates to `Result<T, StoreError>`.
///
/// A macro rather than a function taking an async closure: the futures of such closures over
/// a borrowed connection are not yet provably `Send` for every borrow, which `dyn Store`
/// needs.
macro_rules! transaction {
    ($db:expr, $retry:expr, |$conn:ident| $body:expr) => {{
        let mut tries = 0u32;
        loop {
            tries += 1;
            let result: ::std::result::Result<_, $crate::tx::Fail> = async {
                let mut tx = $db.pool.begin().await?;
                let out = {
                    let $conn: &mut ::sqlx::MySqlConnection = &mut *tx;
                    $body
                };
                // Rolled back at once when the body fails: a dropped transaction is only
                // rolled back when its connection is next used, and its row locks would
                // make claims skip those tasks until then.
                match out {
                    Ok(out) => {
                        tx.commit().await?;
                        Ok(out)
                    }
                    Err(e) => {
                        tx.rollback().await?;
                        Err(e)
                    }
                }
            }
            .await;
            if let Some(done) = $crate::tx::after_try(result, tries, $retry).await {
                break done;
            }
        }
    }};
}
pub(crate) use transaction;

/// The answer after one try of a transaction, or `None` to try again (after a pause).
pub(crate) async fn after_try<T>(
    result: Result<T, Fail>,
    tries: u32,
    retry: Retry,
) -> Option<Result<T, StoreError>> {
    match result {
        Ok(out) => Some(Ok(out)),
        Err(Fail::Store(e)) => Some(Err(e)),
        Err(Fail::Relock(_)) if tries < TRIES => None,
        Err(Fail::Relock(e)) => Some(Err(db_err(e))),
        Err(Fail::Sql(e)) if tries < TRIES && worth_another_try(&e, retry) => {
            tracing::debug!(tries, error = %e, "transaction lost a lock race; trying again");
            // A duplicate key means the other transaction committed: look again at once.
            if error_number(&e) != Some(DUPLICATE) {
                tokio::time::sleep(pause(tries)).await;
            }
            None
        }
        Err(Fail::Sql(e)) => Some(Err(db_err(e))),
    }
}

/// A few milliseconds, growing with each try, with jitter so that the losers of one race do
/// not meet again.
fn pause(tries: u32) -> Duration {
    let random = uuid::Uuid::now_v7().as_bytes()[15] as u64;
    Duration::from_millis(u64::from(tries) * 5 + random % 10)
}
