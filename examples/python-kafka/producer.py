#!/usr/bin/env python3
"""An order service's "order created" events, published to Kafka as such services do:
kafka-python, acks=all, the order id as the record's key (one order's events stay in one
partition, in order), a JSON body. backstop's bridge consumes the topic as one more consumer
group; nothing here knows about backstop.

    python3 examples/python-kafka/producer.py --count 20 [--bad] [--topic orders]

--bad also publishes what a buggy producer sends: a record whose body is not JSON, and an
order published without its key. Prints what it published as one JSON line.
"""

import argparse
import json
import random
from datetime import datetime, timedelta, timezone

from kafka import KafkaProducer


ORDERS_OPENED = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def order(order_id, n):
    rng = random.Random(order_id)
    items = [{"sku": f"SKU-{rng.randint(100, 999)}", "qty": rng.randint(1, 3),
              "unit_price": f"{rng.randint(300, 4000) / 100:.2f}"} for _ in range(rng.randint(1, 3))]
    total = sum(i["qty"] * float(i["unit_price"]) for i in items)
    return {
        "event": "order.created",
        "order_id": order_id,
        "customer_id": f"cus-{rng.randint(10000, 99999)}",
        "items": items,
        "total": f"{total:.2f}",
        "currency": "EUR",
        # The order's own time, not the publish's: the same order published again is the same
        # bytes, which backstop deduplicates onto its task.
        "created_at": (ORDERS_OPENED + timedelta(seconds=97 * n + rng.randint(0, 90))).isoformat(),
        "sequence": n,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--prefix", default="ord-", help="order ids are PREFIX0001, PREFIX0002, ...")
    parser.add_argument("--bad", action="store_true")
    args = parser.parse_args()

    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap,
        client_id="order-service",
        acks="all",   # a send is done once every in-sync replica has the record
        retries=5,
    )
    headers = [("content-type", b"application/json"), ("event-type", b"order.created")]
    sends, ids = [], []
    for n in range(1, args.count + 1):
        order_id = f"{args.prefix}{n:04d}"
        body = json.dumps(order(order_id, n)).encode()
        sends.append(producer.send(args.topic, key=order_id.encode(), value=body, headers=headers))
        ids.append(order_id)
    bad = 0
    if args.bad:
        # A body cut short (a serializer bug, a truncated write): not JSON.
        sends.append(producer.send(args.topic, key=f"{args.prefix}broken".encode(),
                                   value=b'{"event": "order.created", "order_id": "', headers=headers))
        # An order sent without its key: nothing to tell one order from another.
        sends.append(producer.send(args.topic, key=None,
                                   value=json.dumps(order(f"{args.prefix}unkeyed", 0)).encode(),
                                   headers=headers))
        bad = 2
    # Each send's future resolves on the broker's acknowledgement; .get raises if it failed.
    for s in sends:
        s.get(timeout=30)
    producer.close()
    print(json.dumps({"topic": args.topic, "published": len(sends), "good": args.count,
                      "bad": bad, "order_ids": ids}))


if __name__ == "__main__":
    main()
