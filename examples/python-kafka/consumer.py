#!/usr/bin/env python3
"""A downstream service (fulfilment, say) reading the orders backstop accepted: a kafka-python
consumer group on the topic backstop publishes to. backstop publishes each task until Kafka
acknowledged it, so a record can (rarely) come twice, under the same backstop-task-id header:
the consumer handles each task id once and counts the repeats.

    python3 examples/python-kafka/consumer.py [--topic orders.accepted] [--group fulfilment]
        [--expect 20 [--linger 1]] [--idle 10]

Prints one line per order, then a summary as one JSON line. Exits 1 when a record lacks
backstop's headers or disagrees with them (key, kind, body), or when --expect N is given and
it did not see N orders.
"""

import argparse
import json
import sys
import time

from kafka import KafkaConsumer


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders.accepted")
    parser.add_argument("--group", default="fulfilment")
    parser.add_argument("--kind", default="order.created", help="the backstop-kind expected")
    parser.add_argument("--expect", type=int, help="stop once this many orders arrived")
    parser.add_argument("--linger", type=float, default=0,
                        help="with --expect: read this many seconds more, to see repeats too")
    parser.add_argument("--idle", type=float, default=10, help="stop after this many seconds without a record")
    args = parser.parse_args()

    consumer = KafkaConsumer(
        args.topic,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id="fulfilment",
        auto_offset_reset="earliest",   # a new group starts at the topic's beginning
        enable_auto_commit=False,       # commit once the batch is handled
    )
    seen = {}          # backstop-task-id -> order id: what was handled
    records = duplicates = 0
    problems = []
    last = time.monotonic()
    complete = None     # when the expected orders had all arrived
    try:
        while complete is None or time.monotonic() - complete < args.linger:
            batch = consumer.poll(timeout_ms=500)
            if not batch:
                if time.monotonic() - last > args.idle:
                    break
                continue
            last = time.monotonic()
            for tp, messages in batch.items():
                for m in messages:
                    records += 1
                    h = {k: v.decode() for k, v in m.headers}
                    task_id, key = h.get("backstop-task-id"), m.key.decode() if m.key else None
                    where = f"{tp.topic}/{tp.partition}@{m.offset}"
                    try:
                        body = json.loads(m.value)
                    except ValueError:
                        body = {}
                    wrong = []
                    if not task_id:
                        wrong.append("no backstop-task-id header")
                    if h.get("backstop-kind") != args.kind:
                        wrong.append(f"backstop-kind {h.get('backstop-kind')!r}")
                    if not key or h.get("backstop-key") != key or body.get("order_id") != key:
                        wrong.append(f"key {key!r}, backstop-key {h.get('backstop-key')!r}, "
                                     f"order_id {body.get('order_id')!r}")
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
            consumer.commit()
            if complete is None and args.expect is not None and len(seen) >= args.expect:
                complete = time.monotonic()
    finally:
        consumer.close()
    orders = sorted(seen.values())
    if len(set(orders)) != len(orders):
        problems.append("one order came under two task ids")
    if args.expect is not None and len(seen) != args.expect:
        problems.append(f"{len(seen)} orders arrived, expected {args.expect}")
    print(json.dumps({"topic": args.topic, "group": args.group, "records": records,
                      "duplicates": duplicates, "orders": {k: t for t, k in seen.items()},
                      "problems": problems}))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
