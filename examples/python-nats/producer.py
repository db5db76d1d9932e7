#!/usr/bin/env python3
"""An order service's "order created" events, published to JetStream as such services do:
nats-py, one subject, a JSON body, the order id as Nats-Msg-Id (a retried publish is stored
once), each publish awaited until the stream acknowledged it. backstop's bridge reads the
stream through a durable consumer of its own; nothing here knows about backstop.

    python3 examples/python-nats/producer.py --count 20 [--bad] [--subject orders.created]

--bad also publishes what a buggy producer sends: a body that is not JSON, and an order
without its order_id. Prints what it published as one JSON line.
"""

import argparse
import asyncio
import json
import random
from datetime import datetime, timedelta, timezone

import nats


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


async def run(args):
    nc = await nats.connect(args.server, name="order-service")
    js = nc.jetstream()
    headers = {"Content-Type": "application/json", "Event-Type": "order.created"}
    ids, published = [], 0
    for n in range(1, args.count + 1):
        order_id = f"{args.prefix}{n:04d}"
        body = json.dumps(order(order_id, n)).encode()
        # The PubAck: the stream has the message (raises if no stream takes the subject).
        await js.publish(args.subject, body, headers={**headers, "Nats-Msg-Id": order_id})
        ids.append(order_id)
        published += 1
    bad = 0
    if args.bad:
        # A body cut short (a serializer bug, a truncated write): not JSON.
        await js.publish(args.subject, b'{"event": "order.created", "order_id": "', headers=headers)
        # An order without its order_id: nothing to tell one order from another.
        body = order(f"{args.prefix}unnamed", 0)
        del body["order_id"]
        await js.publish(args.subject, json.dumps(body).encode(), headers=headers)
        bad = 2
    await nc.close()
    print(json.dumps({"subject": args.subject, "published": published + bad, "good": args.count,
                      "bad": bad, "order_ids": ids}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="nats://127.0.0.1:4222")
    parser.add_argument("--subject", default="orders.created")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--prefix", default="ord-", help="order ids are PREFIX0001, PREFIX0002, ...")
    parser.add_argument("--bad", action="store_true")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
