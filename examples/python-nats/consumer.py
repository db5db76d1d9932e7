#!/usr/bin/env python3
"""A downstream service (fulfilment, say) reading the orders backstop accepted: a durable
JetStream pull consumer (nats-py) on the stream backstop publishes to, each message acked once
handled. backstop publishes each task with Nats-Msg-Id = its task id, so JetStream stores a
retried publish once within the stream's duplicate window; past it a repeat comes under the
same backstop-task-id, and the consumer handles each task id once and counts the repeats.

    python3 examples/python-nats/consumer.py [--stream ORDERS_ACCEPTED]
        [--subject orders.accepted] [--durable fulfilment] [--expect 20 [--linger 1]]
        [--idle 10]

Prints one line per order, then a summary as one JSON line. Exits 1 when a message lacks
backstop's headers or disagrees with them (Nats-Msg-Id, key, kind, body), or when --expect N
is given and it did not see N orders.
"""

import argparse
import asyncio
import json
import sys
import time

import nats
from nats.errors import TimeoutError as NoMessages


async def run(args):
    nc = await nats.connect(args.server, name="fulfilment")
    js = nc.jetstream()
    sub = await js.pull_subscribe(args.subject, durable=args.durable, stream=args.stream)
    seen = {}          # backstop-task-id -> order id: what was handled
    records = duplicates = 0
    problems = []
    last = time.monotonic()
    complete = None     # when the expected orders had all arrived
    while complete is None or time.monotonic() - complete < args.linger:
        try:
            batch = await sub.fetch(64, timeout=0.5)
        except (NoMessages, asyncio.TimeoutError):  # nats-py raises either when none came
            if time.monotonic() - last > args.idle:
                break
            continue
        last = time.monotonic()
        for m in batch:
            records += 1
            h = m.headers or {}
            task_id, key = h.get("backstop-task-id"), h.get("backstop-key")
            where = f"{m.subject} #{m.metadata.sequence.stream}"
            try:
                body = json.loads(m.data)
            except ValueError:
                body = {}
            wrong = []
            if not task_id or h.get("Nats-Msg-Id") != task_id:
                wrong.append(f"backstop-task-id {task_id!r}, Nats-Msg-Id {h.get('Nats-Msg-Id')!r}")
            if h.get("backstop-kind") != args.kind:
                wrong.append(f"backstop-kind {h.get('backstop-kind')!r}")
            if not key or body.get("order_id") != key:
                wrong.append(f"backstop-key {key!r}, order_id {body.get('order_id')!r}")
            await m.ack()
            if wrong:
                problems.append(f"{where}: " + "; ".join(wrong))
                continue
            if task_id in seen:
                duplicates += 1
                print(f"{where} task {task_id}: a repeat of order {key}, skipped")
                continue
            seen[task_id] = key
            # The order's real handling (reserve stock, ...) would go here.
            print(f"{where} order {key} total {body.get('total')} {body.get('currency')}"
                  f" task {task_id} attempt {h.get('backstop-attempt')}")
        if complete is None and args.expect is not None and len(seen) >= args.expect:
            complete = time.monotonic()
    await nc.close()
    orders = sorted(seen.values())
    if len(set(orders)) != len(orders):
        problems.append("one order came under two task ids")
    if args.expect is not None and len(seen) != args.expect:
        problems.append(f"{len(seen)} orders arrived, expected {args.expect}")
    print(json.dumps({"stream": args.stream, "durable": args.durable, "records": records,
                      "duplicates": duplicates, "orders": {k: t for t, k in seen.items()},
                      "problems": problems}))
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="nats://127.0.0.1:4222")
    parser.add_argument("--stream", default="ORDERS_ACCEPTED")
    parser.add_argument("--subject", default="orders.accepted")
    parser.add_argument("--durable", default="fulfilment")
    parser.add_argument("--kind", default="order.created", help="the backstop-kind expected")
    parser.add_argument("--expect", type=int, help="stop once this many orders arrived")
    parser.add_argument("--linger", type=float, default=0,
                        help="with --expect: read this many seconds more, to see repeats too")
    parser.add_argument("--idle", type=float, default=10, help="stop after this many seconds without a message")
    sys.exit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
