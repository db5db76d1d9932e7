#!/usr/bin/env python3
"""A pull worker for backstop, with the standard library only.

    python3 examples/python/worker.py [--kinds report.render] [--lease 30] [--exit-after N]

It long-polls POST /v1/leases for one task at a time, heartbeats the lease from a background
thread while `handle` works, and reports the outcome: succeeded; retry (any exception: backstop
retries with the kind's backoff while attempts remain); failed (`Permanent`: a dead letter at
once). SIGINT/SIGTERM stop it after the task in hand is reported. Environment: BACKSTOP_URL
(default http://127.0.0.1:7300), BACKSTOP_TOKEN (bearer token).
"""

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

BACKSTOP_URL = os.environ.get("BACKSTOP_URL", "http://127.0.0.1:7300").rstrip("/")
BACKSTOP_TOKEN = os.environ.get("BACKSTOP_TOKEN")
WAIT_SECONDS = 20  # long poll: the server answers as soon as a task is due, or after this

log = logging.getLogger("worker")


class Permanent(Exception):
    """An error a retry cannot fix: the task fails now and waits in the dead letters."""


def handle(task):
    """Your business logic. The demo payload can ask for slow work or for failures."""
    payload = task["payload"] if isinstance(task["payload"], dict) else {}
    time.sleep(payload.get("seconds", 0))  # pretend to render the report
    if payload.get("fail") == "permanent":
        raise Permanent("the report template does not exist")
    if payload.get("fail") == "once" and task["attempt"] == 1:
        raise RuntimeError("the renderer is busy")


class BackstopError(Exception):
    """The API refused a request; `detail` says why (problem+json)."""

    def __init__(self, status, detail):
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status


class LeaseLost(BackstopError):
    """409: the lease expired or another worker holds the task now."""


def call(path, body, timeout=10):
    """POST JSON to the API; returns the decoded answer."""
    request = urllib.request.Request(
        BACKSTOP_URL + path, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    if BACKSTOP_TOKEN:
        request.add_header("Authorization", f"Bearer {BACKSTOP_TOKEN}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        try:
            detail = json.load(e).get("detail")
        except ValueError:
            detail = e.reason
        raise (LeaseLost if e.code == 409 else BackstopError)(e.code, detail) from None


def heartbeat(token, every, done):
    """Extends the lease every `every` seconds until `done` is set or the lease is lost."""
    while not done.wait(every):
        try:
            call(f"/v1/leases/{urllib.parse.quote(token)}/heartbeat", {})
        except LeaseLost as e:
            # The work goes on (this demo cannot interrupt it); its outcome will be refused.
            log.warning("lease lost while working: %s", e)
            return
        except Exception as e:  # a missed beat is survivable: the lease has slack left
            log.warning("heartbeat failed: %s", e)


def work(task, lease_seconds):
    """Runs one leased task with a heartbeat and reports its outcome."""
    done = threading.Event()
    # Three beats per lease: one slow or failed beat still leaves time for the next.
    beat = threading.Thread(
        target=heartbeat, args=(task["token"], lease_seconds / 3, done), daemon=True)
    beat.start()
    try:
        handle(task)
        outcome = {"outcome": "succeeded"}
    except Permanent as e:
        outcome = {"outcome": "failed", "error": str(e)}
    except Exception as e:
        outcome = {"outcome": "retry", "error": f"{type(e).__name__}: {e}"}
    finally:
        done.set()
        beat.join()
    if "error" in outcome:  # the API takes up to 4096 bytes of it
        outcome["error"] = outcome["error"].encode()[:4096].decode(errors="ignore")
    name = f"{task['kind']}/{task['key']} attempt {task['attempt']}/{task['max_attempts']}"
    try:
        answer = call(f"/v1/leases/{urllib.parse.quote(task['token'])}/complete", outcome)
        log.info("%s: %s -> %s", name, outcome["outcome"], answer["status"])
    except LeaseLost as e:
        # Someone else owns the task now (it was rescued after our lease ran out and will run
        # again, or already has): backstop kept their outcome and recorded ours as stale.
        # Nothing to undo here; the handler must be idempotent anyway.
        log.warning("%s: %s not recorded, lease lost: %s", name, outcome["outcome"], e)
    except (BackstopError, OSError) as e:
        # Unrecorded: the lease runs out and backstop hands the task out again.
        log.error("%s: cannot report %s: %s", name, outcome["outcome"], e)


class Stop(Exception):
    """Raised by the signal handler to end a long poll."""


def main():
    parser = argparse.ArgumentParser(description="A backstop pull worker.")
    parser.add_argument("--kinds", default="report.render", help="comma-separated pull kinds")
    parser.add_argument("--worker", default=f"{socket.gethostname()}-{os.getpid()}")
    parser.add_argument("--lease", type=int, default=30, help="lease length, seconds")
    parser.add_argument("--exit-after", type=int, metavar="N",
                        help="exit after handling N leased attempts (for CI)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    # A signal during the long poll ends it at once (nothing is leased yet, or if the server
    # just leased us a task, its lease expires and backstop hands it out again); during work
    # it only asks the loop to stop once the task in hand is reported.
    state = {"busy": False, "stopping": False}

    def on_signal(_signum, _frame):
        state["stopping"] = True
        if not state["busy"]:
            raise Stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    request = {"kinds": args.kinds.split(","), "max": 1, "lease": f"{args.lease}s",
               "worker": args.worker, "wait": f"{WAIT_SECONDS}s"}
    handled = 0
    log.info("%s leasing %s from %s", args.worker, args.kinds, BACKSTOP_URL)
    try:
        while not state["stopping"] and handled != args.exit_after:
            try:
                tasks = call("/v1/leases", request, timeout=WAIT_SECONDS + 10)["tasks"]
            except (BackstopError, OSError) as e:
                if isinstance(e, BackstopError) and e.status < 500:
                    # A wrong token, an unknown kind, a push kind: retrying will not help.
                    sys.exit(f"worker: leasing refused: {e}")
                log.warning("lease failed, retrying: %s", e)  # backstop down or restarting
                time.sleep(1)
                continue
            for task in tasks:
                state["busy"] = True
                work(task, args.lease)
                state["busy"] = False
                handled += 1
    except Stop:
        pass
    log.info("stopped after %d attempts", handled)


if __name__ == "__main__":
    main()
