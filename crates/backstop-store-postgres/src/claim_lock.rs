//! The advisory locks that serialise a limited kind's claims (and a host's), by name.
//!
//! A lock's key is the server's own `hashtextextended('backstop claim <schema> <name>', 0)`,
//! asked once per name and kept, so every process (whatever its release) takes the same lock
//! for the same name. Knowing the key as a number lets a claim take its locks in the round trip
//! that begins its transaction (`BEGIN; SELECT pg_advisory_xact_lock(…)`, a simple query whose
//! text holds nothing but digits), instead of one round trip per lock.

use crate::{Db, db_err};
use backstop_core::StoreError;
use sqlx::PgConnection;
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Mutex;

/// `$1` the schema, `$2` the lock's name.
const KEY: &str = "SELECT hashtextextended('backstop claim ' || $1 || ' ' || $2, 0)";

/// Takes one lock by key, until the transaction ends.
const LOCK: &str = "SELECT pg_advisory_xact_lock($1)";

/// The keys of the claim locks asked so far, by name.
#[derive(Default)]
pub(crate) struct ClaimLocks {
    keys: Mutex<HashMap<String, i64>>,
}

impl ClaimLocks {
    /// The lock keys of `names`, in their order: from memory, or asked of the server once.
    pub(crate) async fn keys(&self, db: &Db, names: &[String]) -> Result<Vec<i64>, StoreError> {
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let known = self
                .keys
                .lock()
                .expect("claim lock keys")
                .get(name)
                .copied();
            let key = match known {
                Some(k) => k,
                None => {
                    let (k,): (i64,) = sqlx::query_as(KEY)
                        .bind(db.schema.name())
                        .bind(name)
                        .fetch_one(&db.pool)
                        .await
                        .map_err(db_err)?;
                    self.keys
                        .lock()
                        .expect("claim lock keys")
                        .insert(name.clone(), k);
                    k
                }
            };
            out.push(key);
        }
        Ok(out)
    }
}

/// `BEGIN` followed by taking each lock in `keys`, in order: one simple query.
pub(crate) fn begin_locked(keys: &[i64]) -> String {
    let mut sql = String::from("BEGIN");
    for k in keys {
        let _ = write!(sql, "; SELECT pg_advisory_xact_lock({k})");
    }
    sql
}

/// Takes each lock in `keys`, in order, in the open transaction `tx`.
pub(crate) async fn lock_in(tx: &mut PgConnection, keys: &[i64]) -> Result<(), StoreError> {
    for k in keys {
        sqlx::query(LOCK)
            .bind(k)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    Ok(())
}
