//! The writer's prepared statements, kept between transactions.
//!
//! Compiling a statement costs more than running it once for most of the writer's hot
//! statements (a completion batch's unpark, a claim's lease per shape): at 32 attempts at once,
//! where batches are small, `sqlite3_prepare_v3` was 10–14 % of a drain's samples. Every
//! writer statement is a `&'static str`, so the cache is keyed by where its text lives, and
//! never grows past the statements the code has.
//!
//! A statement is taken out while in use and put back, reset and unbound, when its `Stmt`
//! drops (a second use of the same text at once compiles its own, finalised after). The
//! statements belong to one connection: [`StmtCache::clear`] finalises them before that
//! connection is closed or replaced, and the cache is dropped before the writer (sqlx panics
//! when it closes a connection with statements still open).

use libsqlite3_sys as ffi;
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::Mutex;

/// A statement's text, by address and length.
type Key = (usize, usize);

/// The writer's prepared statements; see the module doc.
#[derive(Default)]
pub(crate) struct StmtCache {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The connection the statements were prepared on.
    handle: Option<Handle>,
    stmts: HashMap<Key, Prepared>,
}

/// A connection handle, compared only.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Handle(NonNull<ffi::sqlite3>);

/// A prepared statement not in use.
struct Prepared(NonNull<ffi::sqlite3_stmt>);

// SAFETY: the cache is used only while the writer connection is locked for the calling
// thread (a `raw::Db`), or to finalise statements when nothing else uses the connection.
unsafe impl Send for State {}

fn key(sql: &'static str) -> Key {
    (sql.as_ptr() as usize, sql.len())
}

impl StmtCache {
    /// Takes the prepared statement of `sql` on `handle`, if one is kept.
    pub(crate) fn take(
        &self,
        handle: NonNull<ffi::sqlite3>,
        sql: &'static str,
    ) -> Option<NonNull<ffi::sqlite3_stmt>> {
        let mut s = self.state.lock().expect("not poisoned");
        if s.handle != Some(Handle(handle)) {
            // Another connection: the writer was replaced, and `clear` emptied the cache first.
            debug_assert!(s.stmts.is_empty(), "statements of a replaced connection");
            s.stmts.clear();
            s.handle = Some(Handle(handle));
            return None;
        }
        s.stmts.remove(&key(sql)).map(|p| p.0)
    }

    /// Puts `stmt` (reset and unbound) back for the next use of `sql` on `handle`; finalises it
    /// when one is kept already or the cache now serves another connection.
    pub(crate) fn put(
        &self,
        handle: NonNull<ffi::sqlite3>,
        sql: &'static str,
        stmt: NonNull<ffi::sqlite3_stmt>,
    ) {
        let mut s = self.state.lock().expect("not poisoned");
        let spare = if s.handle == Some(Handle(handle)) {
            s.stmts.insert(key(sql), Prepared(stmt))
        } else {
            Some(Prepared(stmt))
        };
        drop(s);
        if let Some(p) = spare {
            // SAFETY: the statement is live, reset, and no longer used.
            unsafe { ffi::sqlite3_finalize(p.0.as_ptr()) };
        }
    }

    /// Finalises every kept statement: before their connection is closed or replaced.
    pub(crate) fn clear(&self) {
        let mut s = self.state.lock().expect("not poisoned");
        for (_, p) in s.stmts.drain() {
            // SAFETY: kept statements are reset and unused; their connection is still open.
            unsafe { ffi::sqlite3_finalize(p.0.as_ptr()) };
        }
        s.handle = None;
    }
}

impl Drop for StmtCache {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::StmtCache;
    use crate::connect::{SqliteOptions, writer};
    use crate::raw;
    use sqlx::Connection;

    const SQL: &str = "SELECT count(*) FROM sqlite_master";

    #[tokio::test]
    async fn a_statement_is_compiled_once_and_kept_until_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let opts = SqliteOptions::from_url(&dir.path().join("c.db").display().to_string()).unwrap();
        let mut w = writer(&opts, None).await.unwrap();
        let cache = StmtCache::default();
        let (first, again, beside) = raw::write(&mut w, &cache, |db| {
            let first = db.prepare(SQL)?.address();
            let again = db.prepare(SQL)?;
            // In use: a second use at once compiles its own.
            let beside = db.prepare(SQL)?.address();
            Ok((first, again.address(), beside))
        })
        .await
        .unwrap();
        assert_eq!(first, again, "the second use took the kept statement");
        assert_ne!(again, beside, "a statement in use is not handed out twice");
        // The next transaction finds it kept, and it runs as compiled.
        let (next, count) = raw::write(&mut w, &cache, |db| {
            let mut s = db.prepare(SQL)?;
            let mut n = -1;
            s.query(&[], |r| {
                n = r.int(0);
                Ok(())
            })?;
            Ok((s.address(), n))
        })
        .await
        .unwrap();
        assert!(next == first || next == beside, "compiled again");
        assert!(count >= 0);
        assert_eq!(cache.state.lock().unwrap().stmts.len(), 1);
        // Cleared (the writer is about to be replaced): nothing kept, and the connection
        // closes cleanly (sqlx panics on a close with statements left open).
        cache.clear();
        assert!(cache.state.lock().unwrap().stmts.is_empty());
        w.close().await.unwrap();
    }
}
