#!/usr/bin/env python3
"""The naive baseline for `backstop bench` on SQLite (issue 16): one thread, batches of
1,000, WAL with synchronous = FULL; per batch one transaction inserting the tasks, one
claiming them (an update per task), one completing them (an update per task). No attempt
records, no leases, no idempotency check: what a hand-written job loop does, as fast as
Python's C-level sqlite3 module runs it.

    bench/sqlite-loop/loop.py [--tasks 100000] [--batch 1000]

Prints one line: tasks, seconds, tasks/s (first insert to last completion).
"""
import argparse
import os
import sqlite3
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sqlite-loop-") as d:
        db = sqlite3.connect(os.path.join(d, "loop.db"), isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute(
            "CREATE TABLE jobs (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL,"
            " payload BLOB NOT NULL, status TEXT NOT NULL, run_at INTEGER NOT NULL,"
            " attempts INTEGER NOT NULL DEFAULT 0, updated_at INTEGER)"
        )
        db.execute("CREATE INDEX jobs_pending ON jobs (run_at) WHERE status = 'pending'")
        started = time.perf_counter()
        done = 0
        while done < a.tasks:
            n = min(a.batch, a.tasks - done)
            now = time.time_ns()
            rows = [
                ("bench", f"k-{done + i}", b'{"n":1}', "pending", now) for i in range(n)
            ]
            db.execute("BEGIN")
            db.executemany(
                "INSERT INTO jobs (kind, key, payload, status, run_at) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            db.execute("COMMIT")
            db.execute("BEGIN")
            ids = [
                (now, r[0])
                for r in db.execute(
                    "SELECT id FROM jobs WHERE status = 'pending' AND run_at <= ?"
                    " ORDER BY run_at LIMIT ?",
                    (now, n),
                )
            ]
            db.executemany(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, updated_at = ?"
                " WHERE id = ?",
                ids,
            )
            db.execute("COMMIT")
            db.execute("BEGIN")
            db.executemany(
                "UPDATE jobs SET status = 'succeeded', updated_at = ? WHERE id = ?", ids
            )
            db.execute("COMMIT")
            done += n
        elapsed = time.perf_counter() - started
        (count,) = db.execute("SELECT count(*) FROM jobs WHERE status = 'succeeded'").fetchone()
        assert count == a.tasks, f"{count} of {a.tasks} succeeded"
        print(f"sqlite-loop: {a.tasks} tasks in {elapsed:.2f} s: {a.tasks / elapsed:.0f} tasks/s")


if __name__ == "__main__":
    main()
