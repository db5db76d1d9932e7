#!/usr/bin/env bash
# Catching up a backlog with more processes (issue 16): N tasks already queued in a PostgreSQL
# ledger, drained by P `backstop serve` processes on the same database, for each P given. The
# kind publishes to a Redis list (a target that answers at once: LPUSH, confirmed by Redis),
# so the figure is the ledger's: claim, attempt record and completion per task.
#
# Usage: bench/backlog/run.sh [-n N] [--procs "1 2 3"] [--pg URL] [--redis URL]
#   -n N         tasks queued before the processes start (env N; default 1000000)
#   --procs LIST processes per measurement, one measurement each (env PROCS; default "1 2 3")
#   --pg URL     PostgreSQL database URL (env PG_URL; default postgres://postgres@127.0.0.1:5432/test)
#   --redis URL  Redis for the target (env REDIS_URL; default redis://127.0.0.1:6379/0)
# The backstop binary is $BACKSTOP (default $CARGO_TARGET_DIR/release/backstop, built by
# `cargo build --release -p backstop`). Each measurement gets a schema of its own
# (backlog_<P>_<time>), filled with the outbox's plain INSERT, vacuumed and analysed (as a
# long-running server's autovacuum would have it), dropped afterwards with its Redis list.
# Prints one line per P: tasks/s from the first process's start to the last task's end.
set -euo pipefail

N="${N:-1000000}"
PROCS="${PROCS:-1 2 3}"
PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/backstop-target}"
BACKSTOP="${BACKSTOP:-$CARGO_TARGET_DIR/release/backstop}"
while [ $# -gt 0 ]; do
  case "$1" in
    -n) N="$2"; shift 2 ;;
    --procs) PROCS="$2"; shift 2 ;;
    --pg) PG_URL="$2"; shift 2 ;;
    --redis) REDIS_URL="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$BACKSTOP" ] || { echo "run.sh: no backstop binary at $BACKSTOP (cargo build --release -p backstop)" >&2; exit 1; }
command -v psql >/dev/null || { echo "run.sh: psql is needed" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "run.sh: redis-cli is needed" >&2; exit 1; }

WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
sql() { psql "$PG_URL" -X -q -v ON_ERROR_STOP=1 -At -c "$1"; }
now() { date +%s.%N; }

echo "N=$N tasks queued; PostgreSQL $PG_URL; $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ); load $(cut -d' ' -f1 /proc/loadavg)"
for p in $PROCS; do
  schema="backlog_${p}_$(date +%s)"
  list="backstop-backlog-$schema"
  sep='?'; case "$PG_URL" in *\?*) sep='&' ;; esac
  url="$PG_URL${sep}schema=$schema"
  "$BACKSTOP" --database "$url" migrate >/dev/null
  # The backlog, as an application's outbox would write it (one statement).
  sql "INSERT INTO $schema.tasks (kind, key, payload)
       SELECT 'backlog.noop', 'b-' || g, convert_to('{\"n\":' || g || '}', 'UTF8')
       FROM generate_series(1, $N) AS g"
  sql "VACUUM ANALYZE $schema.tasks"
  sql "CHECKPOINT" 2>/dev/null || true   # needs superuser or pg_checkpoint; optional
  redis-cli -u "$REDIS_URL" DEL "$list" >/dev/null
  cat >"$WORK/backstop.toml" <<TOML
[kinds."backlog.noop"]
target = "redis"
broker = "$REDIS_URL"
list = "$list"
TOML
  t0="$(now)"
  PIDS=()
  for i in $(seq "$p"); do
    "$BACKSTOP" --config "$WORK/backstop.toml" --database "$url" serve --listen "127.0.0.1:$((7400 + i))" \
      >"$WORK/serve-$i.log" 2>&1 &
    PIDS+=("$!")
  done
  # Done when nothing is pending or running (both counts read the claim's partial indexes).
  while :; do
    left="$(sql "SELECT count(*) FROM $schema.tasks WHERE status IN ('pending', 'running')")"
    [ "$left" = 0 ] && break
    for pid in "${PIDS[@]}"; do
      kill -0 "$pid" 2>/dev/null || { echo "run.sh: a serve process died; its log:" >&2; tail -20 "$WORK"/serve-*.log >&2; exit 1; }
    done
    sleep 0.2
  done
  t1="$(now)"
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
  done_n="$(sql "SELECT count(*) FROM $schema.tasks WHERE status = 'succeeded'")"
  pushed="$(redis-cli -u "$REDIS_URL" LLEN "$list")"
  awk -v p="$p" -v n="$N" -v t0="$t0" -v t1="$t1" -v s="$done_n" -v r="$pushed" 'BEGIN {
    printf "processes %d: %d tasks in %.1f s = %.0f tasks/s (succeeded %d, published %d)\n", p, n, t1 - t0, n / (t1 - t0), s, r }'
  [ "$done_n" = "$N" ] || { echo "run.sh: only $done_n of $N succeeded" >&2; exit 1; }
  sql "SET client_min_messages = warning; DROP SCHEMA $schema CASCADE"
  redis-cli -u "$REDIS_URL" DEL "$list" >/dev/null
done
