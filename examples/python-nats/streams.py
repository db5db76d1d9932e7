#!/usr/bin/env python3
"""Create (or delete) the two JetStream streams of the story, with nats-py.

    python3 examples/python-nats/streams.py create [--orders ORDERS:orders.created]
        [--accepted ORDERS_ACCEPTED:orders.accepted] [--max-age SECONDS]
    python3 examples/python-nats/streams.py delete --orders ... --accepted ...

Each is NAME:SUBJECT. ORDERS holds what the order service publishes; ORDERS_ACCEPTED what
backstop publishes (a JetStream publish needs a stream on its subject, and backstop's bridge
needs its stream to exist: neither creates one). A stream that exists is left as it is.
Prints what it did as one JSON line.
"""

import argparse
import asyncio
import json

import nats
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError


def name_subject(value):
    name, _, subject = value.partition(":")
    if not name or not subject:
        raise argparse.ArgumentTypeError(f"{value!r} is not NAME:SUBJECT")
    return name, subject


async def run(args):
    nc = await nats.connect(args.server, name="orders-admin")
    js = nc.jetstream()
    done = {}
    for name, subject in (args.orders, args.accepted):
        if args.action == "create":
            try:
                await js.stream_info(name)
                done[name] = "existing"
            except NotFoundError:
                # duplicate_window: a publish repeated with the same Nats-Msg-Id within it
                # (a producer's retry, backstop's retry) is stored once. It cannot be longer
                # than max_age.
                window = min(120.0, args.max_age or 120.0)
                await js.add_stream(StreamConfig(name=name, subjects=[subject],
                                                 duplicate_window=window, max_age=args.max_age))
                done[name] = "created"
        else:
            try:
                await js.delete_stream(name)
                done[name] = "deleted"
            except NotFoundError:
                done[name] = "absent"
    await nc.close()
    print(json.dumps(done))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["create", "delete"])
    parser.add_argument("--server", default="nats://127.0.0.1:4222")
    parser.add_argument("--orders", type=name_subject, default=("ORDERS", "orders.created"))
    parser.add_argument("--accepted", type=name_subject,
                        default=("ORDERS_ACCEPTED", "orders.accepted"))
    parser.add_argument("--max-age", type=float, help="messages older than this are dropped")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
