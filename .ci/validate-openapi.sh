#!/usr/bin/env bash
# Validates the served /openapi.json with an independent validator (openapi-spec-validator,
# not the crate that generates the document): OpenAPI 3.1 structure, schemas, and one
# operationId per operation, which generated clients turn into method names.
# Usage: .ci/validate-openapi.sh BACKSTOP_BINARY
set -euo pipefail
bin=${1:?usage: validate-openapi.sh BACKSTOP_BINARY}
validator=${OPENAPI_SPEC_VALIDATOR:-openapi-spec-validator}
command -v "$validator" >/dev/null || { echo "validate-openapi: $validator is not installed: pip install openapi-spec-validator" >&2; exit 1; }

dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$dir" && exec "$bin" serve --listen "127.0.0.1:$port" >"$dir/serve.log" 2>&1) &
serve=$!
trap 'kill $serve 2>/dev/null || true; wait $serve 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/openapi.json" -o "$dir/openapi.json" \
  || { echo "validate-openapi: no /openapi.json" >&2; tail -20 "$dir/serve.log" >&2; exit 1; }
"$validator" "$dir/openapi.json"
echo "validate-openapi: passed"
