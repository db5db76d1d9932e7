#!/usr/bin/env bash
# Runs the client examples against a real `backstop serve`: examples/python (enqueue, a pull
# worker) and examples/php (enqueue, a signed push handler), with the examples' own configs
# and an API token. Also checks that the snippets in README.md and docs/*.md are still the
# examples' code.
#
#   BACKSTOP_BIN=/var/tmp/backstop-target/debug/backstop .ci/examples.sh
#
# Needs python3 and curl; php for the PHP half (skipped without it, unless
# BACKSTOP_REQUIRE_PHP=1). Takes about 15 seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "examples: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

[[ -n "${BACKSTOP_BIN:-}" ]] || fail "set BACKSTOP_BIN to the backstop binary (e.g. target/debug/backstop)"
[[ -f "$BACKSTOP_BIN" && -x "$BACKSTOP_BIN" ]] || fail "BACKSTOP_BIN=$BACKSTOP_BIN is not an executable file"
BACKSTOP_BIN=$(realpath "$BACKSTOP_BIN")
command -v python3 >/dev/null || fail "python3 is needed"
command -v curl >/dev/null || fail "curl is needed"
have_php=0
if command -v php >/dev/null; then
    have_php=1
elif [[ "${BACKSTOP_REQUIRE_PHP:-0}" == 1 ]]; then
    fail "php is not installed and BACKSTOP_REQUIRE_PHP=1"
else
    echo "examples: php not found: skipping the PHP examples (BACKSTOP_REQUIRE_PHP=1 makes this an error)"
fi

work=$(mktemp -d)
pids=()
cleanup() {
    local status=$?
    if ((status != 0)) && [[ -n "${server:-}" ]] && kill -0 "$server" 2>/dev/null; then
        echo "--- tasks (newest first)"
        api "/v1/tasks?limit=20" | python3 -c 'import json, sys
for t in json.load(sys.stdin)["tasks"]:
    print(t["id"], t["status"], t["kind"] + "/" + t["key"], "attempts", t["attempts"],
          t["last_error"] or t["reason"] or "")' || true
    fi >&2
    # CONT too: a stopped process would never act on the TERM.
    # `|| true`: a process that exits between the two signals must not fail a passing run
    # (errexit applies to the last command of an && list, even in this trap).
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null && kill -CONT "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if ((status != 0)); then
        for f in "$work"/*.log; do
            [[ -e "$f" ]] && { echo "--- ${f##*/} (last lines)"; tail -n 25 "$f"; }
        done >&2
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# --- helpers -------------------------------------------------------------------------------
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# field KEY...: prints a value of the JSON on stdin (lists print as JSON).
field() {
    python3 -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = v[k]
print(json.dumps(v) if isinstance(v, (list, dict)) else v)' "$@"
}
api() { curl -fsS -H "Authorization: Bearer $BACKSTOP_TOKEN" "$BACKSTOP_URL$1"; }
task() { api "/v1/tasks/$1"; }
# expect ID FIELD VALUE: the task's FIELD is VALUE now.
expect() {
    local got
    got=$(task "$1" | field "$2") || fail "cannot read task $1"
    [[ "$got" == "$3" ]] || fail "task $1: $2 is '$got', expected '$3'"
}
# wait_until DESCRIPTION SECONDS COMMAND...: polls COMMAND every 100 ms.
wait_until() {
    local what=$1 limit=$2 deadline=$((SECONDS + $2))
    shift 2
    until "$@"; do
        ((SECONDS < deadline)) || fail "timed out after ${limit}s waiting for $what"
        sleep 0.1
    done
}
alive() { kill -0 "$1" 2>/dev/null || fail "$2 exited; see its log below"; }
exited() { ! kill -0 "$1" 2>/dev/null; }
# wait_exit PID SECONDS WHAT: waits for a background job to end, fails unless it exits 0.
wait_exit() {
    local status=0
    wait_until "$3 to exit" "$2" exited "$1"
    wait "$1" || status=$?
    ((status == 0)) || fail "$3 exited with status $status"
}
has_status() { [[ "$(task "$1" | field status)" == "$2" ]]; }
# run_enqueue LANGUAGE ARGS...: runs an enqueue example, echoes its answer, sets $id.
run_enqueue() {
    local lang=$1 out
    shift
    case $lang in
        python) out=$(python3 examples/python/enqueue.py "$@") || fail "enqueue.py $* failed" ;;
        php) out=$(php examples/php/enqueue.php "$@") || fail "enqueue.php $* failed" ;;
    esac
    echo "   $out"
    id=$(field id <<<"$out")
}

# --- the docs' snippets are the examples' code ---------------------------------------------
step "snippets in README.md and docs/ match the example files"
python3 - README.md docs/*.md <<'EOF' || fail "a snippet in the docs no longer matches its example file"
import re, sys
# A snippet is introduced by "From [`examples/...`](...):" and must appear in that file verbatim.
pattern = re.compile(r"From\s+\[`(examples/[^`]+)`\]\([^)]*\):\n\n```\w*\n(.*?)```", re.S)
checked = 0
for doc in sys.argv[1:]:
    text = open(doc).read()
    for path, code in pattern.findall(text):
        if code not in open(path).read():
            sys.exit(f"{doc}: the snippet from {path} is not in {path} any more")
        checked += 1
if checked == 0:
    sys.exit("no snippets found")
print(f"   {checked} snippets checked")
EOF

# --- start backstop (and the PHP handler) ---------------------------------------------------
port=$(free_port)
php_port=$(free_port)
export BACKSTOP_URL="http://127.0.0.1:$port"
export BACKSTOP_TOKEN
BACKSTOP_TOKEN=$(python3 -c 'import secrets; print("ci_" + secrets.token_urlsafe(24))')
token_sha256=$(python3 -c 'import hashlib, sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())' "$BACKSTOP_TOKEN")
secret=$(sed -n 's/^secret = "\(whsec_[^"]*\)".*/\1/p' examples/php/backstop.toml)
[[ -n "$secret" ]] || fail "no secret = \"whsec_...\" line in examples/php/backstop.toml"

# Both examples' configs, with the handler on a free port and a token (so the examples' bearer
# token code runs too).
{
    cat examples/python/backstop.toml examples/php/backstop.toml
    printf '\n[[api.tokens]]\nname = "ci"\nsha256 = "%s"\n' "$token_sha256"
} | sed "s#http://127.0.0.1:8081/#http://127.0.0.1:$php_port/#" >"$work/backstop.toml"
grep -q "127.0.0.1:$php_port/" "$work/backstop.toml" ||
    fail "examples/php/backstop.toml does not push to http://127.0.0.1:8081/ any more; update this script"

step "backstop serve on $BACKSTOP_URL (database and config in $work)"
# NO_COLOR: plain log lines in backstop.log.
(cd "$work" && NO_COLOR=1 exec "$BACKSTOP_BIN" --config backstop.toml --database "sqlite://$work/backstop.db" \
    serve --listen "127.0.0.1:$port") >"$work/backstop.log" 2>&1 &
server=$!
pids+=("$server")

if ((have_php)); then
    step "php -S 127.0.0.1:$php_port examples/php/handler.php"
    WEBHOOK_SECRET=$secret HANDLER_LOG=$work/deliveries.jsonl \
        php -S "127.0.0.1:$php_port" examples/php/handler.php >"$work/php.log" 2>&1 &
    handler=$!
    pids+=("$handler")
fi

ready() { alive "$server" "backstop serve" && curl -fsS -o /dev/null "$BACKSTOP_URL/readyz" 2>/dev/null; }
wait_until "backstop's /readyz" 10 ready
if ((have_php)); then
    handler_up() { alive "$handler" "php -S" && curl -sS -o /dev/null "http://127.0.0.1:$php_port/" 2>/dev/null; }
    wait_until "the PHP handler" 10 handler_up
fi

# --- Python: enqueue.py and worker.py ------------------------------------------------------
step "python: worker.py long-polls while enqueue.py adds four report.render tasks"
# A 2 s lease: the 3 s task finishes only because the heartbeat thread extends it.
python3 examples/python/worker.py --lease 2 --exit-after 5 --worker ci-worker \
    >"$work/worker.log" 2>&1 &
worker=$!
pids+=("$worker")
sleep 0.5 # let it start polling: the tasks then arrive through the long poll
run_enqueue python report.render ci-plain '{"report": "daily", "day": "2026-11-29"}'
plain=$id
run_enqueue python report.render ci-slow '{"seconds": 3}'
slow=$id
run_enqueue python report.render ci-flaky '{"fail": "once"}'
flaky=$id
run_enqueue python report.render ci-broken '{"fail": "permanent"}'
broken=$id

step "python: enqueue.py is idempotent by (kind, key)"
run_enqueue python report.render ci-plain '{"report": "daily", "day": "2026-11-29"}'
[[ "$id" == "$plain" ]] || fail "the same key and payload gave another task: $id, not $plain"
if err=$(python3 examples/python/enqueue.py report.render ci-plain '{"report": "weekly"}' 2>&1); then
    fail "enqueue.py accepted another payload for a used key: $err"
fi
[[ "$err" == *"HTTP 409"* ]] || fail "enqueue.py with a conflicting payload said: $err"
echo "   conflict refused: $err"

step "python: worker.py handles 5 attempts (a retry among them) and exits"
wait_exit "$worker" 20 "worker.py --exit-after 5"
sed 's/^/   /' "$work/worker.log"
expect "$plain" status succeeded
expect "$slow" status succeeded
expect "$slow" attempts 1 # no rescue: the heartbeats kept the lease
expect "$flaky" status succeeded
expect "$flaky" attempts 2
expect "$broken" status failed
task "$broken" | field last_error | grep -q "template does not exist" || fail "task $broken: wrong last_error"
echo "   ci-plain, ci-slow, ci-flaky succeeded; ci-broken failed (dead letter)"

step "python: a worker that stalls past its lease gets 409 on complete and says so"
python3 examples/python/worker.py --lease 1 --exit-after 1 --worker ci-stalled \
    >"$work/stalled.log" 2>&1 &
worker=$!
pids+=("$worker")
run_enqueue python report.render ci-stalled '{"seconds": 3}'
stalled=$id
wait_until "ci-stalled to be leased" 10 has_status "$stalled" running
# Freeze the worker mid-task, as a long GC pause or a suspended VM would: no heartbeats, so
# the 1 s lease expires and backstop rescues the task. Then let the worker carry on.
kill -STOP "$worker"
wait_until "ci-stalled to be rescued" 10 has_status "$stalled" pending
kill -CONT "$worker"
wait_exit "$worker" 10 "the stalled worker.py"
sed 's/^/   /' "$work/stalled.log"
grep -q "not recorded, lease lost" "$work/stalled.log" || fail "worker.py did not log the lost lease"
task "$stalled" | field events | grep -q '"stale_completion"' ||
    fail "task $stalled: no stale_completion on the timeline"

# --- PHP: enqueue.php and handler.php ------------------------------------------------------
if ((have_php)); then
    step "php: enqueue.php an invoice.email task; backstop pushes it to handler.php"
    invoice='{"invoice": "2024-0042", "to": "ada@example.com", "lines": [], "meta": {}}'
    run_enqueue php invoice.email ci-invoice-42 "$invoice"
    pushed=$id
    # Done when the task succeeded and the handler logged it; a task that ended otherwise
    # (a 401 from the handler dead-letters it) fails at once, with its last_error.
    pushed_and_logged() {
        local now
        now=$(task "$pushed" | field status)
        [[ $now == failed || $now == compensated ]] &&
            fail "task $pushed ended $now: $(task "$pushed" | field last_error)"
        [[ $now == succeeded ]] && grep -q "\"id\":\"$pushed\"" "$work/deliveries.jsonl"
    }
    wait_until "task $pushed to be delivered to handler.php" 10 pushed_and_logged
    # The body the handler verified is the payload given to enqueue.php.
    python3 - "$work/deliveries.jsonl" "$pushed" "$invoice" <<'EOF' || fail "handler.php logged another body"
import json, sys
log, task_id, payload = sys.argv[1:]
bodies = [d["body"] for d in map(json.loads, open(log)) if d["id"] == task_id]
assert [json.loads(b) for b in bodies] == [json.loads(payload)], bodies
EOF
    echo "   delivered, verified and logged by handler.php; task succeeded"

    step "php: handler.php refuses what is not signed by the secret"
    # sign ID TIMESTAMP BODY: the webhook-signature backstop would send.
    sign() {
        python3 -c 'import base64, hashlib, hmac, sys
secret, msg_id, ts, body = sys.argv[1:]
key = base64.b64decode(secret.removeprefix("whsec_"))
mac = hmac.new(key, f"{msg_id}.{ts}.{body}".encode(), hashlib.sha256).digest()
print("v1," + base64.b64encode(mac).decode())' "$secret" "$@"
    }
    # deliver EXPECTED_STATUS WHAT ID TIMESTAMP SIGNATURE BODY
    deliver() {
        local code
        code=$(curl -sS -o /dev/null -w '%{http_code}' -H "webhook-id: $3" \
            -H "webhook-timestamp: $4" -H "webhook-signature: $5" \
            -H 'content-type: application/json' --data-binary "$6" \
            "http://127.0.0.1:$php_port/hooks/invoice-email")
        [[ "$code" == "$1" ]] || fail "handler.php answered $code to $2, expected $1"
        echo "   $1 for $2"
    }
    now=$(date +%s)
    body='{"invoice": "2024-0042"}'
    good=$(sign msg_ci_good "$now" "$body")
    deliver 204 "a correct signature" msg_ci_good "$now" "$good" "$body"
    deliver 204 "one good signature among several" msg_ci_good "$now" "v1,AAAA $good" "$body"
    sig=$(sign msg_ci_bad "$now" "$body")
    deliver 401 "a tampered body" msg_ci_bad "$now" "$sig" '{"invoice": "2024-0043"}'
    mac=${sig#v1,}
    [[ ${mac:0:1} == A ]] && flipped="v1,B${mac:1}" || flipped="v1,A${mac:1}"
    deliver 401 "a tampered signature" msg_ci_bad "$now" "$flipped" "$body"
    deliver 401 "another message's signature" msg_ci_other "$now" "$sig" "$body"
    deliver 401 "a signature under another scheme" msg_ci_bad "$now" "v2,$mac" "$body"
    old=$((now - 600))
    deliver 401 "a 10-minute-old timestamp" msg_ci_old "$old" "$(sign msg_ci_old "$old" "$body")" "$body"
    deliver 401 "no signature" msg_ci_none "$now" "" "$body"
    if grep -Eq '"id":"msg_ci_(bad|other|old|none)"' "$work/deliveries.jsonl"; then
        fail "handler.php logged a delivery it should have refused"
    fi
fi

echo "examples passed"
