//! SQLite's memory statistics, turned off before the library starts: while it keeps them, each
//! of its allocations and frees takes a process-wide mutex, and the ledger's statements
//! allocate a great deal. Measured with `backstop bench ledger --tasks 50000` (release builds,
//! four alternated pairs, BENCHMARKS.md): the drain 1.08 times as fast without them, and 1.14
//! times with 10,000 ordering groups. Nothing in backstop reads the statistics.

use std::sync::Once;

static OFF: Once = Once::new();

/// Turns the statistics off, once per process, before the first connection. SQLite takes the
/// setting only before it initialises: in a process where something else started it first,
/// the call is refused (`SQLITE_MISUSE`) and changes nothing.
pub(crate) fn off() {
    OFF.call_once(|| {
        // SAFETY: `sqlite3_config` must not run beside other SQLite calls; this runs before
        // this process's first connection, which every SQLite call of backstop goes through,
        // and `Once` keeps a second caller waiting until it returns. After initialisation it
        // only reads a flag and returns SQLITE_MISUSE.
        let rc = unsafe {
            libsqlite3_sys::sqlite3_config(
                libsqlite3_sys::SQLITE_CONFIG_MEMSTATUS,
                0 as std::ffi::c_int,
            )
        };
        if rc != libsqlite3_sys::SQLITE_OK {
            tracing::debug!(
                rc,
                "SQLite had started already: its memory statistics stay on"
            );
        }
    });
}
