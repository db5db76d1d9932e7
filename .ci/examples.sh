#!/usr/bin/env bash
# Runs the client examples against a real `backstop serve`: examples/python (enqueue, a pull
# worker) and examples/php (enqueue, a signed push handler), with the examples' own configs
# and an API token; then examples/php-rabbitmq (PHP producers on RabbitMQ bridged into the
# ledger, a flaky push target, an old worker's dead letters taken in and retried) and
# examples/php-redis (a Redis list queue bridged in), and the Python interop stories
# examples/python-kafka and examples/python-nats (an order service's "order created" events
# published with kafka-python or nats-py, bridged into the ledger, published again by a kafka
# or nats kind and read by the example's consumer, each order once), each against a server of
# its own with that example's config. Also checks that the snippets in README.md and
# docs/*.md are still the examples' code.
#
#   BACKSTOP_BIN=/var/tmp/backstop-target/debug/backstop .ci/examples.sh
#
# Needs python3 and curl; php for the PHP half (skipped without it, unless
# BACKSTOP_REQUIRE_PHP=1); for the RabbitMQ part also php-amqplib and RabbitMQ at
# 127.0.0.1:5672 (guest/guest) (skipped without them, unless BACKSTOP_REQUIRE_RABBITMQ=1; it
# deletes and declares the queues sms.requests, sms.legacy, sms.dead and the exchange
# sms.dlx); for the Redis part php-redis and Redis at 127.0.0.1:6379 (unless
# BACKSTOP_REQUIRE_REDIS=1). The Python + Kafka part needs kafka-python importable by
# ${BACKSTOP_PYTHON:-python3} and a Kafka-protocol broker at 127.0.0.1:9092 (skipped without
# them, unless BACKSTOP_REQUIRE_KAFKA=1); it creates two new topics each run and deletes
# none, since deleting a topic on Tansu crashes the librdkafka consumers still reading it.
# The Python + NATS part needs nats-py and NATS with JetStream at 127.0.0.1:4222 (unless
# BACKSTOP_REQUIRE_NATS=1); its two streams are new each run and deleted at its end.
# E.g. BACKSTOP_PYTHON=/var/tmp/examples-venv/bin/python, a venv with
# `pip install kafka-python nats-py`. Takes under a minute (about 20 seconds without php).
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
# The RabbitMQ part: php with php-amqplib, and the broker listening.
have_rabbitmq=0
amqplib=/usr/share/php/PhpAmqpLib/autoload.php
rabbitmq_up() {
    python3 -c 'import socket; socket.create_connection(("127.0.0.1", 5672), timeout=2).close()' 2>/dev/null
}
if ((have_php)) && [[ -f $amqplib ]] && rabbitmq_up; then
    have_rabbitmq=1
else
    if ((!have_php)); then
        why="php is not installed"
    elif [[ ! -f $amqplib ]]; then
        why="php-amqplib is not installed ($amqplib)"
    else
        why="RabbitMQ is not reachable at 127.0.0.1:5672"
    fi
    [[ "${BACKSTOP_REQUIRE_RABBITMQ:-0}" == 1 ]] && fail "$why and BACKSTOP_REQUIRE_RABBITMQ=1"
    echo "examples: $why: skipping the PHP + RabbitMQ example (BACKSTOP_REQUIRE_RABBITMQ=1 makes this an error)"
fi

# The Redis part: php with php-redis, and Redis listening.
have_redis=0
redis_up() {
    python3 -c 'import socket; socket.create_connection(("127.0.0.1", 6379), timeout=2).close()' 2>/dev/null
}
if ((have_php)) && php -m 2>/dev/null | grep -qx redis && redis_up; then
    have_redis=1
else
    why="php-redis is not installed or Redis is not reachable at 127.0.0.1:6379"
    ((have_php)) || why="php is not installed"
    [[ "${BACKSTOP_REQUIRE_REDIS:-0}" == 1 ]] && fail "$why and BACKSTOP_REQUIRE_REDIS=1"
    echo "examples: $why: skipping the PHP + Redis example (BACKSTOP_REQUIRE_REDIS=1 makes this an error)"
fi

# The Python + Kafka and Python + NATS parts: the client library importable by
# ${BACKSTOP_PYTHON:-python3}, and the broker listening.
py=${BACKSTOP_PYTHON:-python3}
port_open() {
    python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()' "$1" 2>/dev/null
}
# python_story VAR NAME MODULE PORT BROKER REQUIRE: sets VAR to 1 when MODULE imports and PORT
# is open; else to 0 and says why, or fails when the variable REQUIRE is 1.
python_story() {
    local why=""
    if ! "$py" -c "import $3" 2>/dev/null; then
        why="$py cannot import $3"
    elif ! port_open "$4"; then
        why="$5 is not reachable at 127.0.0.1:$4"
    fi
    printf -v "$1" %d "$([[ -z $why ]] && echo 1 || echo 0)"
    [[ -z $why ]] && return
    [[ "${!6:-0}" == 1 ]] && fail "$why and $6=1"
    echo "examples: $why: skipping the Python + $2 example ($6=1 makes this an error)"
}
python_story have_kafka Kafka kafka 9092 "a Kafka-protocol broker" BACKSTOP_REQUIRE_KAFKA
python_story have_nats NATS nats 4222 NATS BACKSTOP_REQUIRE_NATS

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

# --- PHP + RabbitMQ: examples/php-rabbitmq ---------------------------------------------------
if ((have_rabbitmq)); then
    rmq=examples/php-rabbitmq
    step "php + rabbitmq: amqp.php reset declares sms.requests, sms.legacy → sms.dlx → sms.dead afresh"
    out=$(php $rmq/amqp.php reset) || fail "amqp.php reset failed"
    echo "   $out"

    # A second server with the example's own config (its SMS target on a free port, the
    # token), its own database.
    sms_port=$(free_port)
    rmq_port=$(free_port)
    {
        cat $rmq/backstop.toml
        printf '\n[[api.tokens]]\nname = "ci"\nsha256 = "%s"\n' "$token_sha256"
    } | sed "s#http://127.0.0.1:8082/#http://127.0.0.1:$sms_port/#" >"$work/rabbitmq.toml"
    grep -q "127.0.0.1:$sms_port/" "$work/rabbitmq.toml" ||
        fail "$rmq/backstop.toml does not push to http://127.0.0.1:8082/ any more; update this script"
    # rbq ARGS...: the CLI on that server's config and ledger.
    rbq() { (cd "$work" && NO_COLOR=1 "$BACKSTOP_BIN" --config rabbitmq.toml --database "sqlite://$work/rabbitmq.db" "$@"); }

    step "php -S 127.0.0.1:$sms_port $rmq/sms_target.php (503 to every third new delivery)"
    SMS_TARGET_LOG=$work/sms.jsonl php -S "127.0.0.1:$sms_port" $rmq/sms_target.php >"$work/sms_target.log" 2>&1 &
    sms_target=$!
    pids+=("$sms_target")
    export BACKSTOP_URL="http://127.0.0.1:$rmq_port"
    step "backstop serve on $BACKSTOP_URL with $rmq/backstop.toml (bridges sms-in, sms-dead)"
    (cd "$work" && NO_COLOR=1 exec "$BACKSTOP_BIN" --config rabbitmq.toml --database "sqlite://$work/rabbitmq.db" \
        serve --listen "127.0.0.1:$rmq_port") >"$work/backstop-rabbitmq.log" 2>&1 &
    server=$! # `ready` and the dump on failure now look at this one
    pids+=("$server")
    wait_until "backstop's /readyz" 10 ready
    sms_target_up() { alive "$sms_target" "php -S sms_target.php" && curl -fsS -o /dev/null "http://127.0.0.1:$sms_port/" 2>/dev/null; }
    wait_until "the SMS target" 10 sms_target_up
    # bridge_of NAME FIELD: that field of the bridge NAME in a bridge list on stdin, as JSON.
    bridge_of() {
        python3 -c 'import json, sys
bridges = {b["name"]: b for b in json.load(sys.stdin)["bridges"]}
name, key = sys.argv[1:]
print(json.dumps(bridges[name][key]) if name in bridges else "absent")' "$@"
    }
    connected() {
        local bridges
        bridges=$(api /v1/bridges)
        [[ $(bridge_of sms-in connected <<<"$bridges") == true && $(bridge_of sms-dead connected <<<"$bridges") == true ]]
    }
    wait_until "both bridges to connect" 15 connected

    n=20 again=3
    step "php + rabbitmq: producer.php publishes $n SMS requests ($again of them twice) and 2 bad messages"
    out=$(php $rmq/producer.php --count $n --again $again --bad) || fail "producer.php failed"
    echo "   $out"
    published=$(field published <<<"$out")
    ((published == n + again + 2)) || fail "producer.php published $published messages, expected $((n + again + 2))"
    settled() {
        local bridges
        bridges=$(api /v1/bridges)
        [[ $(bridge_of sms-in received <<<"$bridges") == "$published" && $(bridge_of sms-in in_flight <<<"$bridges") == 0 ]]
    }
    wait_until "bridge sms-in to settle $published messages" 20 settled
    count_tasks() { api "/v1/tasks?kind=$1&status=$2&limit=1000" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["tasks"]))'; }
    all_sent() { [[ $(count_tasks sms.send succeeded) == "$n" ]]; }
    wait_until "$n sms.send tasks to succeed" 30 all_sent

    step "php + rabbitmq: one succeeded task per order, delivered once; the bad messages are rejects"
    python3 - "$work/sms.jsonl" "$out" <<'EOF' || fail "the ledger or the SMS target disagrees with what was published"
import json, os, sys, urllib.request
log, produced = sys.argv[1], json.loads(sys.argv[2])
def get(path):
    r = urllib.request.Request(os.environ["BACKSTOP_URL"] + path,
                               headers={"Authorization": "Bearer " + os.environ["BACKSTOP_TOKEN"]})
    with urllib.request.urlopen(r, timeout=10) as answer:
        return json.load(answer)
def check(ok, what):
    if not ok:
        sys.exit("examples: " + what)
orders, n, again = produced["order_ids"], produced["good"], produced["again"]
tasks = get("/v1/tasks?kind=sms.send&limit=1000")["tasks"]
keys = sorted(t["key"] for t in tasks)
check(keys == sorted(orders), f"sms.send tasks {keys}, expected one per order {sorted(orders)}")
check(all(t["status"] == "succeeded" for t in tasks), "an sms.send task is not succeeded")
# Every third first delivery got a 503 and was retried once.
attempts = sum(t["attempts"] for t in tasks)
check(attempts == n + n // 3, f"{attempts} attempts in all, expected {n} + {n // 3} retries")
accepted = [json.loads(line) for line in open(log)]
by_id = {}
for d in accepted:
    by_id.setdefault(d["id"], []).append(d)
for t in tasks:
    got = by_id.get(t["id"], [])
    check(len(got) == 1, f"task {t['id']} ({t['key']}) was accepted {len(got)} times by the SMS target")
    check(json.loads(got[0]["body"])["order_id"] == t["key"] == got[0]["key"],
          f"task {t['id']}: the SMS target got {got[0]}")
check(len(accepted) == n, f"the SMS target accepted {len(accepted)} deliveries, expected {n}")
print(f"   {n} sms.send tasks succeeded, one per order; {n // 3} after a 503; each accepted once")
# The repeated messages are on their tasks' timelines, not new tasks.
for t in tasks:
    events = get(f"/v1/tasks/{t['id']}")["events"]
    created = [e for e in events if e["type"] == "created"]
    check((created[0].get("origin") or {}).get("queue") == "sms.requests",
          f"task {t['key']}: its created event has no origin queue sms.requests: {created}")
    redelivered = sum(e["type"] == "redelivered" for e in events)
    expected = 1 if orders.index(t["key"]) < again else 0
    check(redelivered == expected,
          f"task {t['key']}: {redelivered} redelivered events on its timeline, expected {expected}")
print(f"   the {again} repeated messages are one redelivered event each on their tasks' timelines")
rejects = get("/v1/tasks?kind=backstop.rejected.sms-in&limit=1000")["tasks"]
check(len(rejects) == 2, f"{len(rejects)} backstop.rejected.sms-in tasks, expected 2")
for t in rejects:
    check(t["status"] == "failed", f"reject {t['id']} is {t['status']}, expected failed (a dead letter)")
    check(t["attempts"] == 0, f"reject {t['id']} had {t['attempts']} attempts, expected none")
    check((t["last_error"] or "").startswith("rejected by bridge sms-in: "),
          f"reject {t['id']}: last_error {t['last_error']!r}")
errors = sorted(t["last_error"] or "" for t in rejects)
check("no string or number at /order_id" in errors[0] and "not JSON" in errors[1],
      f"rejects' reasons: {errors}")
for e in errors:
    print(f"   failed backstop.rejected.sms-in: {e}")
EOF
    dead=$(rbq dead list --kind backstop.rejected.sms-in --json) || fail "backstop dead list failed"
    [[ $(python3 -c 'import json, sys; print(len(json.load(sys.stdin)))' <<<"$dead") == 2 ]] ||
        fail "backstop dead list --kind backstop.rejected.sms-in does not list the 2 rejects: $dead"
    echo "   backstop dead list --kind backstop.rejected.sms-in lists both"

    step "php + rabbitmq: bridges list --json and GET /v1/bridges: received = inserted + deduplicated + rejected"
    # The CLI reads the bridges' beats, written every 5 s.
    beat_caught_up() { [[ $(rbq bridges list --json | bridge_of sms-in received) == "$published" ]]; }
    wait_until "backstop bridges list to show sms-in's counts" 15 beat_caught_up
    rbq bridges list | sed 's/^/   /'
    # counted LABEL N AGAIN: the bridge list on stdin shows sms-in's counts for this run.
    counted() {
        python3 -c 'import json, sys
label, n, again = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
doc = json.load(sys.stdin)
b = {b["name"]: b for b in doc["bridges"]}["sms-in"]
want = {"state": "running", "connected": True, "inserted": n, "deduplicated": again,
        "rejected": 2, "in_flight": 0, "balanced": True}
wrong = {k: b[k] for k, v in want.items() if b[k] != v}
if wrong or b["received"] != b["inserted"] + b["deduplicated"] + b["rejected"]:
    sys.exit(f"examples: {label}: sms-in is {b}; expected {want} and received = the sum")
not_seen, received = doc.get("configured_not_seen", []), b["received"]
if not_seen:
    sys.exit(f"examples: {label}: configured_not_seen is {not_seen}")
print(f"   {label}: received {received} = inserted {n} + deduplicated {again} + rejected 2, in flight 0")' "$@"
    }
    rbq bridges list --json | counted "bridges list --json" $n $again || fail "backstop bridges list --json"
    api /v1/bridges | counted "GET /v1/bridges" $n $again || fail "GET /v1/bridges"

    step "php + rabbitmq: sms.requests is empty: every message was acknowledged"
    # depth QUEUE: ready messages, by a passive declare from PHP.
    depth() { php $rmq/amqp.php depth "$1" || fail "amqp.php depth $1 failed"; }
    [[ $(depth sms.requests) == 0 ]] || fail "sms.requests still holds $(depth sms.requests) messages"
    # rabbitmqctl (when it may talk to the broker) also counts the unacknowledged ones.
    if command -v rabbitmqctl >/dev/null &&
        rabbitmqctl -q --no-table-headers list_queues name messages messages_unacknowledged >"$work/queues.txt" 2>/dev/null; then
        line=$(awk '$1 == "sms.requests"' "$work/queues.txt")
        [[ $line == $'sms.requests\t0\t0' ]] || fail "rabbitmqctl list_queues: '$line', expected 0 ready and 0 unacknowledged"
        echo "   rabbitmqctl list_queues: sms.requests 0 ready, 0 unacknowledged"
    else
        echo "   passive declare: sms.requests 0 ready (rabbitmqctl not usable here)"
    fi

    step "php + rabbitmq: worker.php sends two sms.legacy messages and rejects one (requeue=false) to sms.dlx"
    out=$(php $rmq/producer.php --queue sms.legacy --count 2 --prefix legacy-) || fail "producer.php --queue sms.legacy failed"
    echo "   $out"
    out=$(php $rmq/producer.php --queue sms.legacy --count 1 --prefix intl- --to +442071838750) ||
        fail "producer.php --queue sms.legacy failed"
    echo "   $out"
    php $rmq/worker.php --exit-after 3 --idle 10 >"$work/legacy-worker.log" 2>&1 &
    legacy=$!
    pids+=("$legacy")
    wait_exit "$legacy" 20 "worker.php --exit-after 3"
    sed 's/^/   /' "$work/legacy-worker.log"
    [[ $(grep -c '^sent legacy-' "$work/legacy-worker.log") == 2 ]] || fail "worker.php did not send legacy-1 and legacy-2"
    grep -q '^rejected: the legacy gateway cannot reach +442071838750' "$work/legacy-worker.log" ||
        fail "worker.php did not reject intl-1"

    step "php + rabbitmq: bridge sms-dead takes the dead letter in as a failed sms.send task"
    intake() { api "/v1/tasks?kind=sms.send&key=$1&limit=10" | field tasks; }
    dead_letter_in() {
        local got status
        got=$(intake intl-1)
        [[ $got == "[]" ]] && return 1
        status=$(python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["status"])' <<<"$got")
        [[ $status == failed ]] ||
            fail "the dead letter intl-1 became a $status sms.send task, expected failed (dead_letters = true)"
    }
    wait_until "bridge sms-dead to take in intl-1" 10 dead_letter_in
    dead_id=$(intake intl-1 | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["id"])')
    rbq dead list --kind sms.send | sed 's/^/   /'
    rbq dead list --kind sms.send --json | python3 -c 'import json, sys
ids = [t["id"] for t in json.load(sys.stdin)]
sys.exit(None if ids == [sys.argv[1]] else f"examples: backstop dead list --kind sms.send lists {ids}")' "$dead_id" ||
        fail "backstop dead list --kind sms.send"
    expect "$dead_id" attempts 0
    reason=$(task "$dead_id" | field last_error)
    [[ $reason == 'dead letter: rejected from queue "sms.legacy"'* ]] ||
        fail "task $dead_id: last_error '$reason', expected the broker's death reason"
    echo "   $dead_id failed: $reason"
    task "$dead_id" | python3 -c 'import json, sys
created = [e for e in json.load(sys.stdin)["events"] if e["type"] == "created"][0]
death = (created.get("origin") or {}).get("x-death") or [{}]
sys.exit(None if death[0].get("queue") == "sms.legacy" and death[0].get("reason") == "rejected"
         else f"examples: the created event has no x-death from sms.legacy: {created}")' ||
        fail "task $dead_id: no x-death on its created event"
    grep -q "\"id\":\"$dead_id\"" "$work/sms.jsonl" && fail "the dead letter $dead_id was delivered before it was retried"
    [[ $(intake legacy-1) == "[]" && $(intake legacy-2) == "[]" ]] ||
        fail "the messages worker.php handled became tasks"
    for q in sms.legacy sms.dead; do
        [[ $(depth $q) == 0 ]] || fail "$q still holds $(depth $q) messages"
    done
    echo "   sms.legacy and sms.dead are empty; legacy-1 and legacy-2 (sent by worker.php) are no tasks"

    step "php + rabbitmq: backstop dead retry sends it through sms.send's target"
    out=$(rbq dead retry "$dead_id") || fail "backstop dead retry $dead_id failed"
    echo "   $out"
    wait_until "the retried dead letter to succeed" 15 has_status "$dead_id" succeeded
    [[ $(grep -c "\"id\":\"$dead_id\"" "$work/sms.jsonl") == 1 ]] || fail "the SMS target did not accept $dead_id once"
    task "$dead_id" | field events | grep -q '"retried"' || fail "task $dead_id: no retried event on its timeline"
    echo "   $dead_id succeeded after $(task "$dead_id" | field attempts) attempt(s); the SMS target accepted it"

    step "php + rabbitmq: stop this backstop, delete the queues"
    kill -TERM "$server"
    wait_exit "$server" 20 "backstop serve (rabbitmq)"
    out=$(php $rmq/amqp.php delete) || fail "amqp.php delete failed"
    echo "   $out"
fi

# --- PHP + Redis: examples/php-redis ---------------------------------------------------------
if ((have_redis)); then
    prd=examples/php-redis
    list="sms:requests:ci-$$"
    processing="backstop:processing:sms-redis:ci-$$"
    sms_port=$(free_port)
    rds_port=$(free_port)
    {
        cat $prd/backstop.toml
        printf '\n[[api.tokens]]\nname = "ci"\nsha256 = "%s"\n' "$token_sha256"
    } | sed -e "s#http://127.0.0.1:8082/#http://127.0.0.1:$sms_port/#" \
            -e "s#^queue = \"sms:requests\".*#queue = \"$list\"\nprocessing = \"$processing\"#" >"$work/redis.toml"
    grep -q "127.0.0.1:$sms_port/" "$work/redis.toml" && grep -q "^queue = \"$list\"" "$work/redis.toml" ||
        fail "$prd/backstop.toml changed its target or queue; update this script"
    step "php -S 127.0.0.1:$sms_port examples/php-rabbitmq/sms_target.php, for the Redis story"
    SMS_TARGET_LOG=$work/sms-redis.jsonl php -S "127.0.0.1:$sms_port" examples/php-rabbitmq/sms_target.php >"$work/sms_target_redis.log" 2>&1 &
    pids+=("$!")
    export BACKSTOP_URL="http://127.0.0.1:$rds_port"
    step "backstop serve on $BACKSTOP_URL with $prd/backstop.toml (bridge sms-redis on $list)"
    (cd "$work" && NO_COLOR=1 exec "$BACKSTOP_BIN" --config redis.toml --database "sqlite://$work/redis.db" \
        serve --listen "127.0.0.1:$rds_port") >"$work/backstop-redis.log" 2>&1 &
    server=$!
    pids+=("$server")
    wait_until "backstop's /readyz" 10 ready
    n=20
    step "php + redis: producer.php LPUSHes $n SMS jobs and 1 without its order id"
    out=$(php $prd/producer.php --count $n --bad --list "$list") || fail "producer.php (redis) failed"
    echo "   $out"
    count_of() { api "/v1/tasks?kind=$1&status=$2&limit=1000" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["tasks"]))'; }
    redis_done() { [[ $(count_of sms.send succeeded) == "$n" && $(count_of backstop.rejected.sms-redis failed) == 1 ]]; }
    wait_until "$n sms.send tasks to succeed and 1 reject" 30 redis_done
    echo "   $n sms.send tasks succeeded; the job without an order id is a failed backstop.rejected.sms-redis task"
    step "php + redis: the list and the processing list are empty; the bridge's counts balance"
    left=$(php -r '$r = new Redis(); $r->connect("127.0.0.1", 6379); echo $r->lLen($argv[1]) + $r->lLen($argv[2]);' "$list" "$processing")
    [[ $left == 0 ]] || fail "$left items left in $list and $processing"
    api /v1/bridges | python3 -c 'import json, sys
n = int(sys.argv[1])
b = {b["name"]: b for b in json.load(sys.stdin)["bridges"]}["sms-redis"]
want = {"connected": True, "received": n + 1, "inserted": n, "rejected": 1, "in_flight": 0, "balanced": True}
wrong = {k: b[k] for k, v in want.items() if b[k] != v}
sys.exit(f"examples: sms-redis is {b}; expected {want}") if wrong else print(f"   sms-redis: received {n + 1} = inserted {n} + rejected 1")' $n ||
        fail "GET /v1/bridges (redis)"
    kill -TERM "$server"
    wait_exit "$server" 20 "backstop serve (redis)"
fi

# --- Python + Kafka, Python + NATS: examples/python-kafka, examples/python-nats ---------------
# Both stories are one order service's "order created" events: producer.py publishes them
# with the broker's Python client, the bridge orders-in makes each an order.created task, the
# kind publishes it to a second topic or stream, and consumer.py (another team's service)
# reads them there.
if ((have_kafka || have_nats)); then
    # orders_bridge FIELD: that field of the bridge orders-in in GET /v1/bridges, as JSON.
    orders_bridge() {
        api /v1/bridges | python3 -c 'import json, sys
bridges = {b["name"]: b for b in json.load(sys.stdin)["bridges"]}
print(json.dumps(bridges["orders-in"][sys.argv[1]]) if "orders-in" in bridges else "absent")' "$1"
    }
    orders_connected() { alive "$server" "backstop serve" && [[ $(orders_bridge connected) == true ]]; }
    tasks_of() { api "/v1/tasks?kind=$1&status=$2&limit=1000" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["tasks"]))'; }
    # orders_done N: N order.created tasks succeeded and the 2 bad messages are failed rejects.
    orders_done() { [[ $(tasks_of order.created succeeded) == "$1" && $(tasks_of backstop.rejected.orders-in failed) == 2 ]]; }
    orders_settled() { [[ $(orders_bridge received) == "$1" && $(orders_bridge in_flight) == 0 ]]; }
    # check_ledger LABEL PRODUCED ORIGIN_KEY ORIGIN_VALUE REASON REASON: one succeeded
    # order.created task per order, each created from the bridge's topic or stream; the 2 bad
    # messages are failed rejects with those reasons; GET /v1/bridges balances.
    check_ledger() {
        python3 - "$@" <<'EOF'
import json, os, sys, urllib.request
label, produced, origin_key, origin_value = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
reasons = sys.argv[5:]
def get(path):
    r = urllib.request.Request(os.environ["BACKSTOP_URL"] + path,
                               headers={"Authorization": "Bearer " + os.environ["BACKSTOP_TOKEN"]})
    with urllib.request.urlopen(r, timeout=10) as answer:
        return json.load(answer)
def check(ok, what):
    if not ok:
        sys.exit(f"examples: {label}: {what}")
orders, n = produced["order_ids"], produced["good"]
tasks = get("/v1/tasks?kind=order.created&limit=1000")["tasks"]
keys = sorted(t["key"] for t in tasks)
check(keys == sorted(orders), f"order.created tasks {keys}, expected one per order {sorted(orders)}")
check(all(t["status"] == "succeeded" for t in tasks), "an order.created task is not succeeded")
for t in tasks:
    created = [e for e in get(f"/v1/tasks/{t['id']}")["events"] if e["type"] == "created"]
    origin = created[0].get("origin") or {}
    check(origin.get(origin_key) == origin_value,
          f"task {t['key']}: its created event's origin is {origin}, expected {origin_key} {origin_value!r}")
print(f"   {n} order.created tasks succeeded, one per order, each created from {origin_key} {origin_value}")
rejects = get("/v1/tasks?kind=backstop.rejected.orders-in&limit=1000")["tasks"]
check(len(rejects) == 2, f"{len(rejects)} backstop.rejected.orders-in tasks, expected 2")
errors = sorted(t["last_error"] or "" for t in rejects)
for t in rejects:
    check(t["status"] == "failed" and t["attempts"] == 0,
          f"reject {t['id']} is {t['status']} after {t['attempts']} attempts, expected failed after none")
    check((t["last_error"] or "").startswith("rejected by bridge orders-in: "), f"reject {t['id']}: last_error {t['last_error']!r}")
for reason in reasons:
    check(any(reason in e for e in errors), f"no reject says {reason!r}: {errors}")
for e in errors:
    print(f"   failed backstop.rejected.orders-in: {e}")
b = {b["name"]: b for b in get("/v1/bridges")["bridges"]}["orders-in"]
want = {"state": "running", "connected": True, "received": n + 2, "inserted": n, "deduplicated": 0,
        "rejected": 2, "in_flight": 0, "balanced": True}
wrong = {k: b[k] for k, v in want.items() if b[k] != v}
check(not wrong and b["received"] == b["inserted"] + b["deduplicated"] + b["rejected"],
      f"GET /v1/bridges: orders-in is {b}; expected {want}")
print(f"   GET /v1/bridges: orders-in received {n + 2} = inserted {n} + rejected 2, in flight 0")
EOF
    }
    # check_consumed LABEL SUMMARY: consumer.py's summary line names each order.created task
    # once, under its own key, and nothing else.
    check_consumed() {
        python3 - "$@" <<'EOF'
import json, os, sys, urllib.request
label, summary = sys.argv[1], json.loads(sys.argv[2])
r = urllib.request.Request(os.environ["BACKSTOP_URL"] + "/v1/tasks?kind=order.created&limit=1000",
                           headers={"Authorization": "Bearer " + os.environ["BACKSTOP_TOKEN"]})
with urllib.request.urlopen(r, timeout=10) as answer:
    tasks = {t["key"]: t["id"] for t in json.load(answer)["tasks"]}
def check(ok, what):
    if not ok:
        sys.exit(f"examples: {label}: consumer.py {what}")
check(summary["problems"] == [], f"found problems: {summary['problems']}")
check(summary["records"] == len(tasks) and summary["duplicates"] == 0,
      f"read {summary['records']} messages ({summary['duplicates']} repeats), expected {len(tasks)}, once each")
check(summary["orders"] == tasks, f"saw {summary['orders']}, expected the ledger's {tasks}")
print(f"   consumer.py read {len(tasks)} orders, each once under its task id and key, with backstop's headers")
EOF
    }
fi

if ((have_kafka)); then
    pk=examples/python-kafka
    # New names each run: Tansu does not create topics, and none is ever deleted (deleting a
    # topic on Tansu crashes the librdkafka consumers still reading it).
    run_id="ci-$(date +%s)-$$"
    in_topic="orders.$run_id" out_topic="orders.accepted.$run_id"
    step "python + kafka: topics.py creates $in_topic and $out_topic"
    out=$("$py" $pk/topics.py "$in_topic" "$out_topic") || fail "topics.py failed"
    echo "   $out"
    [[ $(field existing <<<"$out") == "[]" ]] || fail "topics.py: $in_topic or $out_topic was there already"
    kfk_port=$(free_port)
    {
        cat $pk/backstop.toml
        printf '\n[[api.tokens]]\nname = "ci"\nsha256 = "%s"\n' "$token_sha256"
    } | sed -e "s#^topic = \"orders\" #topic = \"$in_topic\" #" \
            -e "s#^topic = \"orders.accepted\" #topic = \"$out_topic\" #" \
            -e "s#^group = \"backstop-orders\" #group = \"backstop-orders-$run_id\" #" >"$work/kafka.toml"
    grep -q "^topic = \"$in_topic\"" "$work/kafka.toml" && grep -q "^topic = \"$out_topic\"" "$work/kafka.toml" &&
        grep -q "^group = \"backstop-orders-$run_id\"" "$work/kafka.toml" ||
        fail "$pk/backstop.toml changed its topics or group; update this script"
    export BACKSTOP_URL="http://127.0.0.1:$kfk_port"
    step "backstop serve on $BACKSTOP_URL with $pk/backstop.toml (bridge orders-in on $in_topic → kafka $out_topic)"
    (cd "$work" && NO_COLOR=1 exec "$BACKSTOP_BIN" --config kafka.toml --database "sqlite://$work/kafka.db" \
        serve --listen "127.0.0.1:$kfk_port") >"$work/backstop-kafka.log" 2>&1 &
    server=$!
    pids+=("$server")
    wait_until "backstop's /readyz" 10 ready
    wait_until "bridge orders-in to connect" 20 orders_connected
    n=20
    step "python + kafka: producer.py sends $n orders (acks=all, keyed by order id) and 2 bad records"
    out=$("$py" $pk/producer.py --topic "$in_topic" --count $n --bad) || fail "producer.py (kafka) failed"
    echo "   $out"
    [[ $(field published <<<"$out") == $((n + 2)) ]] || fail "producer.py published $(field published <<<"$out") records, expected $((n + 2))"
    wait_until "$n order.created tasks to succeed and 2 rejects" 30 orders_done $n
    wait_until "bridge orders-in to settle $((n + 2)) records" 10 orders_settled $((n + 2))
    step "python + kafka: one task per order, from $in_topic; the record that is not JSON and the one without a key are rejects"
    check_ledger "python + kafka" "$out" topic "$in_topic" "payload is not valid JSON" "no message key" || fail "the ledger disagrees with what producer.py sent"
    step "python + kafka: consumer.py (group fulfilment-$run_id) reads $out_topic"
    "$py" $pk/consumer.py --topic "$out_topic" --group "fulfilment-$run_id" --expect $n --linger 1 --idle 20 \
        >"$work/kafka-consumer.log" 2>&1 || fail "consumer.py (kafka) failed"
    head -n 3 "$work/kafka-consumer.log" | sed 's/^/   /'
    echo "   ..."
    check_consumed "python + kafka" "$(tail -n 1 "$work/kafka-consumer.log")" || fail "consumer.py (kafka) did not see each order once"
    kill -TERM "$server"
    wait_exit "$server" 20 "backstop serve (kafka)"
fi

if ((have_nats)); then
    pn=examples/python-nats
    # New names each run; the streams are deleted at the end (and expire within the hour should
    # the run fail before).
    run_id="ci-$(date +%s)-$$"
    tag=${run_id//-/_}
    in_stream="ORDERS_${tag^^}" in_subject="orders.created.$run_id"
    out_stream="ORDERS_ACCEPTED_${tag^^}" out_subject="orders.accepted.$run_id"
    streams=(--orders "$in_stream:$in_subject" --accepted "$out_stream:$out_subject")
    step "python + nats: streams.py creates $in_stream ($in_subject) and $out_stream ($out_subject)"
    out=$("$py" $pn/streams.py create "${streams[@]}" --max-age 3600) || fail "streams.py create failed"
    echo "   $out"
    [[ $out != *existing* ]] || fail "streams.py: $in_stream or $out_stream was there already"
    nats_port=$(free_port)
    {
        cat $pn/backstop.toml
        printf '\n[[api.tokens]]\nname = "ci"\nsha256 = "%s"\n' "$token_sha256"
    } | sed -e "s#^stream = \"ORDERS\" #stream = \"$in_stream\" #" \
            -e "s#^subject = \"orders.created\" #subject = \"$in_subject\" #" \
            -e "s#^subject = \"orders.accepted\" #subject = \"$out_subject\" #" >"$work/nats.toml"
    grep -q "^stream = \"$in_stream\"" "$work/nats.toml" && grep -q "^subject = \"$in_subject\"" "$work/nats.toml" &&
        grep -q "^subject = \"$out_subject\"" "$work/nats.toml" ||
        fail "$pn/backstop.toml changed its stream or subjects; update this script"
    export BACKSTOP_URL="http://127.0.0.1:$nats_port"
    step "backstop serve on $BACKSTOP_URL with $pn/backstop.toml (bridge orders-in on $in_stream → nats $out_subject)"
    (cd "$work" && NO_COLOR=1 exec "$BACKSTOP_BIN" --config nats.toml --database "sqlite://$work/nats.db" \
        serve --listen "127.0.0.1:$nats_port") >"$work/backstop-nats.log" 2>&1 &
    server=$!
    pids+=("$server")
    wait_until "backstop's /readyz" 10 ready
    wait_until "bridge orders-in to connect" 20 orders_connected
    n=20
    step "python + nats: producer.py publishes $n orders (each awaited until its PubAck) and 2 bad messages"
    out=$("$py" $pn/producer.py --subject "$in_subject" --count $n --bad) || fail "producer.py (nats) failed"
    echo "   $out"
    [[ $(field published <<<"$out") == $((n + 2)) ]] || fail "producer.py published $(field published <<<"$out") messages, expected $((n + 2))"
    wait_until "$n order.created tasks to succeed and 2 rejects" 30 orders_done $n
    wait_until "bridge orders-in to settle $((n + 2)) messages" 10 orders_settled $((n + 2))
    step "python + nats: one task per order, from $in_stream; the message that is not JSON and the one without order_id are rejects"
    check_ledger "python + nats" "$out" stream "$in_stream" "not JSON" "no string or number at /order_id" ||
        fail "the ledger disagrees with what producer.py published"
    step "python + nats: consumer.py (durable fulfilment) reads $out_stream"
    "$py" $pn/consumer.py --stream "$out_stream" --subject "$out_subject" --expect $n --linger 1 --idle 20 \
        >"$work/nats-consumer.log" 2>&1 || fail "consumer.py (nats) failed"
    head -n 3 "$work/nats-consumer.log" | sed 's/^/   /'
    echo "   ..."
    check_consumed "python + nats" "$(tail -n 1 "$work/nats-consumer.log")" || fail "consumer.py (nats) did not see each order once"
    kill -TERM "$server"
    wait_exit "$server" 20 "backstop serve (nats)"
    out=$("$py" $pn/streams.py delete "${streams[@]}") || fail "streams.py delete failed"
    echo "   $out"
fi

echo "examples passed"
