#!/usr/bin/env bash
# Fuzzes the HTTP API from its own OpenAPI document with schemathesis: no 5xx, no hang, every
# response matching the documented schema and status codes, schema-violating input rejected.
# Usage: .ci/fuzz-api.sh BACKSTOP_BINARY [MAX_EXAMPLES]
#
# `positive_data_acceptance` is left out on purpose: the API validates more than a schema can
# say (the kind must be configured, expires_at must be after run_at, a lease must not exceed
# api.max_lease), and answers those schema-valid requests with a 404 or 422 by design.
set -euo pipefail
bin=${1:?usage: fuzz-api.sh BACKSTOP_BINARY [MAX_EXAMPLES]}
examples=${2:-100}
st=${ST:-st}
command -v "$st" >/dev/null || { echo "fuzz-api: schemathesis (st) is not installed: pip install schemathesis" >&2; exit 1; }

dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
secret="bst_fuzz_$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
hash=$(printf '%s' "$secret" | sha256sum | cut -d' ' -f1)
cat > "$dir/backstop.toml" <<TOML
[api]
max_wait = "1s"
[[api.tokens]]
name = "fuzzer"
sha256 = "$hash"
[kinds."report.render"]
target = "pull"
[kinds."sms.send"]
url = "http://127.0.0.1:9/none"
max_attempts = 1
[machines.order]
initial = "pending"
transitions = { pending = ["paid", "closed"], paid = ["refunding", "refunded"], refunding = ["refunded"] }
TOML
(cd "$dir" && exec "$bin" serve --listen "127.0.0.1:$port" >"$dir/serve.log" 2>&1) &
serve=$!
trap 'kill $serve 2>/dev/null || true; wait $serve 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done

"$st" run "http://127.0.0.1:$port/openapi.json" \
  --header "Authorization: Bearer $secret" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,negative_data_rejection,missing_required_header,ignored_auth,unsupported_method \
  --max-examples "$examples" \
  --request-timeout 10 \
  --workers 2 \
  --no-color
# The server must still be alive and answering after the fuzzing.
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { echo "fuzz-api: the server stopped answering" >&2; tail -20 "$dir/serve.log" >&2; exit 1; }
if grep -q "panicked" "$dir/serve.log"; then
  echo "fuzz-api: the server panicked:" >&2; grep -A5 panicked "$dir/serve.log" >&2; exit 1
fi
echo "fuzz-api: passed"
