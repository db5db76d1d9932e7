#!/usr/bin/env python3
"""Enqueue one task over backstop's HTTP API, with the standard library only.

    python3 examples/python/enqueue.py KIND KEY PAYLOAD_JSON [--delay 30s]
    python3 examples/python/enqueue.py report.render order-1001 '{"order": "1001"}'

Prints the answer ({"id", "kind", "key", "created"}) as one JSON line. Environment:
BACKSTOP_URL (default http://127.0.0.1:7300), BACKSTOP_TOKEN (bearer token, when the API
has [[api.tokens]]).
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

BACKSTOP_URL = os.environ.get("BACKSTOP_URL", "http://127.0.0.1:7300").rstrip("/")
BACKSTOP_TOKEN = os.environ.get("BACKSTOP_TOKEN")


class BackstopError(Exception):
    """The API refused the request; `detail` says why (problem+json)."""

    def __init__(self, status, detail):
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status


def enqueue(kind, key, payload, **options):
    """Enqueue a task; options: delay="30s", run_at, expires_at, max_attempts.

    Safe to call again with the same kind, key and payload (after a timeout, say): the
    existing task comes back with created=False. The same key with another payload is a 409.
    """
    body = json.dumps({"kind": kind, "key": key, "payload": payload, **options}).encode()
    request = urllib.request.Request(
        f"{BACKSTOP_URL}/v1/tasks", data=body, method="POST",
        headers={"Content-Type": "application/json"})
    if BACKSTOP_TOKEN:
        request.add_header("Authorization", f"Bearer {BACKSTOP_TOKEN}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)  # 201 created, or 200 when it already existed
    except urllib.error.HTTPError as e:
        # 404 unknown kind, 409 key taken by another payload, 413 too large, 422 invalid.
        try:
            detail = json.load(e).get("detail")
        except ValueError:
            detail = e.reason
        raise BackstopError(e.code, detail) from None


def main():
    parser = argparse.ArgumentParser(description="Enqueue one backstop task.")
    parser.add_argument("kind")
    parser.add_argument("key", help="the business id: unique per kind, forever")
    parser.add_argument("payload", help="the payload, JSON")
    parser.add_argument("--delay", help="run no earlier than this from now, e.g. 30s")
    args = parser.parse_args()
    options = {"delay": args.delay} if args.delay else {}
    try:
        task = enqueue(args.kind, args.key, json.loads(args.payload), **options)
    except (BackstopError, urllib.error.URLError, ValueError) as e:
        sys.exit(f"enqueue: {e}")
    print(json.dumps(task))


if __name__ == "__main__":
    main()
