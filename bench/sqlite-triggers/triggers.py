"""What a trigger on backstop_tasks costs on SQLite, per row, whether or not it does anything.

Usage: backstop --database sqlite:///tmp/ledger.db migrate
       python3 bench/sqlite-triggers/triggers.py /tmp/ledger.db

Copies the migrated (empty) ledger, adds a trigger whose WHEN is always false for the rows
written (or none), and times 20,000 inserts and 20,000 status changes in one transaction each,
with Python's sqlite3 module. The figures are CPU-bound (synchronous = OFF): the trigger's
share, not the disk's.
"""
import os
import shutil
import sqlite3
import sys
import time

LEDGER = sys.argv[1]
ROWS = 20_000
TRIGGERS = {
    "no trigger": "",
    "AFTER INSERT, WHEN false": "CREATE TRIGGER t_ins AFTER INSERT ON backstop_tasks "
    "WHEN NEW.grp IS NOT NULL BEGIN SELECT 1; END;",
    "AFTER UPDATE OF status, WHEN false": "CREATE TRIGGER t_upd AFTER UPDATE OF status ON "
    "backstop_tasks WHEN NEW.grp IS NOT NULL BEGIN SELECT 1; END;",
}


def fresh(sql):
    sqlite3.connect(LEDGER).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    copy = LEDGER + ".bench"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(copy + suffix):
            os.remove(copy + suffix)
    shutil.copy(LEDGER, copy)
    c = sqlite3.connect(copy, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=OFF")
    c.executescript(sql)
    return c


for label, sql in list(TRIGGERS.items()) * 2:
    c = fresh(sql)
    t0 = time.perf_counter()
    c.execute("BEGIN")
    c.executemany(
        "INSERT INTO backstop_tasks (id, kind, key, payload, max_attempts, run_at, status,"
        " created_at, updated_at) VALUES (randomblob(16), 'k', ?, '{}', 3, 1000, 0, 1000, 1000)",
        [(f"k{i}",) for i in range(ROWS)],
    )
    c.execute("COMMIT")
    t1 = time.perf_counter()
    seqs = [(r[0],) for r in c.execute("SELECT seq FROM backstop_tasks")]
    c.execute("BEGIN")
    c.executemany("UPDATE backstop_tasks SET status = 1, attempts = attempts + 1 WHERE seq = ?", seqs)
    c.execute("COMMIT")
    t2 = time.perf_counter()
    c.close()
    print(f"{label:40} insert {(t1 - t0) * 1e6 / ROWS:6.1f} µs/row   status change {(t2 - t1) * 1e6 / ROWS:6.1f} µs/row")
