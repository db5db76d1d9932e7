//! Direct SQLite calls on the locked writer connection, for the statements that run once per
//! task (enqueue, claim, completion).
//!
//! sqlx runs every statement on its worker thread and passes every bound value as an owned,
//! reference-counted copy, which costs more than SQLite's own work for a one-row statement:
//! that is why these paths used to batch rows into large multi-row statements (with
//! materialised `VALUES`, JSON round trips and savepoints). Holding the connection's lock
//! (`lock_handle`, sqlx's supported door to the raw handle), a batch instead prepares each
//! statement once, binds borrowed values without copying, steps it once per task and reads
//! results in place. The transaction (`BEGIN IMMEDIATE` … `COMMIT`) runs on the same lock, so
//! a batch costs one hand-over from sqlx's worker thread instead of three, and a cancelled
//! caller cannot leave it half done.

use crate::stmt_cache::StmtCache;
use backstop_core::StoreError;
use libsqlite3_sys as ffi;
use sqlx::SqliteConnection;
use sqlx::sqlite::LockedSqliteHandle;
use std::ffi::{CStr, c_int};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

/// The writer connection, locked away from sqlx's worker thread for direct calls.
pub(crate) struct Db<'c> {
    // Keeps the worker off the handle while statements run; released on drop, after every
    // statement borrowed from this `Db` has been finalised or put back in the cache.
    _guard: LockedSqliteHandle<'c>,
    handle: NonNull<ffi::sqlite3>,
    /// The writer's kept statements (none on a reader).
    cache: Option<&'c StmtCache>,
}

/// Runs `f` in one `BEGIN IMMEDIATE` transaction on the writer connection (outside any sqlx
/// transaction), committing when it returns `Ok` and rolling back otherwise. The calls block;
/// on a multi-thread runtime the runtime hands this thread's other tasks to another thread.
pub(crate) async fn write<R>(
    conn: &mut SqliteConnection,
    cache: &StmtCache,
    f: impl FnOnce(&Db<'_>) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    transaction(conn, Some(cache), f, true).await
}

/// Runs `f` in one `BEGIN IMMEDIATE` transaction on the writer connection and rolls it back
/// whatever `f` returns: for probes that must change nothing.
pub(crate) async fn rolled_back<R>(
    conn: &mut SqliteConnection,
    f: impl FnOnce(&Db<'_>) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    transaction(conn, None, f, false).await
}

async fn transaction<'c, R>(
    conn: &'c mut SqliteConnection,
    cache: Option<&'c StmtCache>,
    f: impl FnOnce(&Db<'_>) -> Result<R, StoreError>,
    commit: bool,
) -> Result<R, StoreError> {
    let mut guard = conn.lock_handle().await.map_err(crate::db_err)?;
    let handle = guard.as_raw_handle();
    let db = Db {
        _guard: guard,
        handle,
        cache,
    };
    let run = || {
        db.exec(c"BEGIN IMMEDIATE")?;
        let tx = Tx(&db);
        let out = f(&db)?;
        if commit {
            db.exec(c"COMMIT")?;
            std::mem::forget(tx);
        }
        // Otherwise `tx` rolls back as it drops.
        Ok(out)
    };
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(run),
        _ => run(),
    }
}

/// Runs `f` on a connection without opening a transaction: for reads of many rows on a reader
/// connection, which sqlx would hand over from its worker thread one row at a time. Each
/// statement is its own consistent snapshot (WAL).
pub(crate) async fn read<R>(
    conn: &mut SqliteConnection,
    f: impl FnOnce(&Db<'_>) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let mut guard = conn.lock_handle().await.map_err(crate::db_err)?;
    let handle = guard.as_raw_handle();
    let db = Db {
        _guard: guard,
        handle,
        cache: None,
    };
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(|| f(&db)),
        _ => f(&db),
    }
}

/// Rolls the open transaction back when dropped (an error or a panic in the middle of it).
struct Tx<'a, 'c>(&'a Db<'c>);

impl Drop for Tx<'_, '_> {
    fn drop(&mut self) {
        // SAFETY: the handle is open and locked. Autocommit on means nothing is open (a failed
        // COMMIT can leave the transaction open or already rolled back).
        if unsafe { ffi::sqlite3_get_autocommit(self.0.handle.as_ptr()) } == 0 {
            let _ = self.0.exec(c"ROLLBACK");
        }
    }
}

impl Db<'_> {
    /// Runs a statement without parameters or results.
    fn exec(&self, sql: &CStr) -> Result<(), StoreError> {
        // SAFETY: the handle is open and locked for this thread; `sql` is NUL-terminated.
        let rc = unsafe {
            ffi::sqlite3_exec(
                self.handle.as_ptr(),
                sql.as_ptr(),
                None,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        if rc == ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(error(self.handle, rc))
        }
    }

    /// The statement of `sql` (exactly one, with `?NNN` parameters): the writer's kept one, or
    /// compiled now (and, on the writer, kept when it drops).
    pub(crate) fn prepare(&self, sql: &'static str) -> Result<Stmt<'_>, StoreError> {
        let cached = self.cache.and_then(|c| c.take(self.handle, sql));
        let stmt = match cached {
            Some(stmt) => stmt,
            None => self.compile(sql)?,
        };
        Ok(Stmt {
            handle: self.handle,
            stmt,
            keep: self.cache.map(|c| (c, sql)),
            _db: PhantomData,
        })
    }

    /// Compiles `sql`.
    fn compile(&self, sql: &str) -> Result<NonNull<ffi::sqlite3_stmt>, StoreError> {
        let len = c_int::try_from(sql.len())
            .map_err(|_| StoreError::Database("statement too long".into()))?;
        let mut stmt = ptr::null_mut();
        // SAFETY: the handle is open and locked for this thread; `sql` outlives the call.
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(
                self.handle.as_ptr(),
                sql.as_ptr().cast(),
                len,
                0,
                &mut stmt,
                ptr::null_mut(),
            )
        };
        match NonNull::new(stmt) {
            Some(stmt) if rc == ffi::SQLITE_OK => Ok(stmt),
            _ => Err(error(self.handle, rc)),
        }
    }
}

fn error(handle: NonNull<ffi::sqlite3>, rc: c_int) -> StoreError {
    // SAFETY: the handle is open and locked; the message is copied before any other call.
    let msg = unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(handle.as_ptr())) };
    let msg = format!("{} (code {rc})", msg.to_string_lossy());
    if crate::is_unavailable(rc) {
        StoreError::Unavailable(msg.into())
    } else {
        StoreError::Database(msg.into())
    }
}

/// A value bound to a parameter, borrowed for the one execution it is bound for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'a> {
    Null,
    Int(i64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl From<i64> for Value<'_> {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(v)
    }
}

impl<'a> From<&'a [u8]> for Value<'a> {
    fn from(v: &'a [u8]) -> Self {
        Value::Blob(v)
    }
}

impl<'a, T: Into<Value<'a>>> From<Option<T>> for Value<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A prepared statement, put back in the writer's cache on drop (finalised elsewhere).
pub(crate) struct Stmt<'d> {
    handle: NonNull<ffi::sqlite3>,
    stmt: NonNull<ffi::sqlite3_stmt>,
    /// Where it goes back, under which text.
    keep: Option<(&'d StmtCache, &'static str)>,
    _db: PhantomData<&'d ()>,
}

impl Stmt<'_> {
    /// Runs the statement with `values` bound to `?1`, `?2`, …; returns the rows it changed.
    pub(crate) fn execute(&mut self, values: &[Value<'_>]) -> Result<u64, StoreError> {
        self.query(values, |_| Ok(()))?;
        // SAFETY: the handle is open and locked for this thread.
        Ok(unsafe { ffi::sqlite3_changes64(self.handle.as_ptr()) } as u64)
    }

    /// Runs the statement with `values` bound to `?1`, `?2`, …, handing each result row to
    /// `row`.
    pub(crate) fn query(
        &mut self,
        values: &[Value<'_>],
        mut row: impl FnMut(&Row<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let run = Run(self);
        run.bind(values)?;
        loop {
            // SAFETY: the statement is live and its bound values outlive `run`.
            match unsafe { ffi::sqlite3_step(run.0.stmt.as_ptr()) } {
                ffi::SQLITE_ROW => row(&Row {
                    stmt: run.0.stmt,
                    _row: PhantomData,
                })?,
                ffi::SQLITE_DONE => return Ok(()),
                rc => return Err(error(run.0.handle, rc)),
            }
        }
    }
}

#[cfg(test)]
impl Stmt<'_> {
    /// Which compiled statement this is.
    pub(crate) fn address(&self) -> usize {
        self.stmt.as_ptr() as usize
    }
}

impl Drop for Stmt<'_> {
    fn drop(&mut self) {
        match self.keep {
            // Every run resets and unbinds it as it ends (`Run`).
            Some((cache, sql)) => cache.put(self.handle, sql, self.stmt),
            // SAFETY: the statement is live and not used after this.
            None => unsafe {
                ffi::sqlite3_finalize(self.stmt.as_ptr());
            },
        }
    }
}

/// One execution: resets the statement and unbinds the borrowed values when it ends, however
/// it ends, so that no pointer outlives the values it points at.
struct Run<'s, 'd>(&'s mut Stmt<'d>);

impl Run<'_, '_> {
    fn bind(&self, values: &[Value<'_>]) -> Result<(), StoreError> {
        let stmt = self.0.stmt.as_ptr();
        for (i, v) in values.iter().enumerate() {
            let i = i as c_int + 1;
            // SAFETY: the statement is live; text and blobs are bound without a copy
            // (SQLITE_STATIC) and stay borrowed until `Run` is dropped, which unbinds them.
            let rc = unsafe {
                match *v {
                    // Every parameter is already NULL: the end of each run clears them all.
                    Value::Null => ffi::SQLITE_OK,
                    Value::Int(n) => ffi::sqlite3_bind_int64(stmt, i, n),
                    Value::Text(s) => ffi::sqlite3_bind_text(
                        stmt,
                        i,
                        s.as_ptr().cast(),
                        len(s.len())?,
                        ffi::SQLITE_STATIC(),
                    ),
                    Value::Blob(b) => ffi::sqlite3_bind_blob(
                        stmt,
                        i,
                        b.as_ptr().cast(),
                        len(b.len())?,
                        ffi::SQLITE_STATIC(),
                    ),
                }
            };
            if rc != ffi::SQLITE_OK {
                return Err(error(self.0.handle, rc));
            }
        }
        Ok(())
    }
}

impl Drop for Run<'_, '_> {
    fn drop(&mut self) {
        // SAFETY: the statement is live. A failed step's error was already reported.
        unsafe {
            ffi::sqlite3_reset(self.0.stmt.as_ptr());
            ffi::sqlite3_clear_bindings(self.0.stmt.as_ptr());
        }
    }
}

fn len(n: usize) -> Result<c_int, StoreError> {
    c_int::try_from(n).map_err(|_| StoreError::Database("value too large to bind".into()))
}

/// The current result row of a [`Stmt::query`]; valid only inside the callback.
pub(crate) struct Row<'s> {
    stmt: NonNull<ffi::sqlite3_stmt>,
    _row: PhantomData<&'s ()>,
}

impl Row<'_> {
    fn is_null(&self, i: c_int) -> bool {
        // SAFETY: the statement is on a row.
        unsafe { ffi::sqlite3_column_type(self.stmt.as_ptr(), i) == ffi::SQLITE_NULL }
    }

    /// An integer column (NULL reads as 0).
    pub(crate) fn int(&self, i: c_int) -> i64 {
        // SAFETY: the statement is on a row.
        unsafe { ffi::sqlite3_column_int64(self.stmt.as_ptr(), i) }
    }

    pub(crate) fn opt_int(&self, i: c_int) -> Option<i64> {
        (!self.is_null(i)).then(|| self.int(i))
    }

    /// A BLOB (or text) column's bytes (NULL reads as empty).
    pub(crate) fn blob(&self, i: c_int) -> &[u8] {
        // SAFETY: the statement is on a row; the bytes stay valid until the next step or
        // reset, which the borrow of `self` rules out.
        unsafe {
            let p = ffi::sqlite3_column_blob(self.stmt.as_ptr(), i);
            let n = ffi::sqlite3_column_bytes(self.stmt.as_ptr(), i);
            if p.is_null() || n <= 0 {
                &[]
            } else {
                std::slice::from_raw_parts(p.cast(), n as usize)
            }
        }
    }

    /// A text column (NULL reads as empty).
    pub(crate) fn text(&self, i: c_int) -> Result<&str, StoreError> {
        // SAFETY: as in `blob`; asking for text first makes SQLite convert if needed.
        let bytes = unsafe {
            let p = ffi::sqlite3_column_text(self.stmt.as_ptr(), i);
            let n = ffi::sqlite3_column_bytes(self.stmt.as_ptr(), i);
            if p.is_null() || n <= 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(p, n as usize)
            }
        };
        std::str::from_utf8(bytes)
            .map_err(|e| StoreError::Database(format!("text column {i} is not UTF-8: {e}").into()))
    }

    pub(crate) fn opt_text(&self, i: c_int) -> Result<Option<String>, StoreError> {
        if self.is_null(i) {
            return Ok(None);
        }
        self.text(i).map(|s| Some(s.to_owned()))
    }
}
