#!/usr/bin/env python3
"""Create Kafka topics with kafka-python's admin client; one that exists already is fine.

    python3 examples/python-kafka/topics.py orders orders.accepted [--partitions 3]

Some brokers (Tansu, or a Kafka cluster with auto.create.topics.enable=false) do not create
a topic on first use: create the topic the producers write to and the one backstop publishes
to before starting either. Prints what it did as one JSON line.
"""

import argparse
import json

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topics", nargs="+")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args()

    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, client_id="orders-admin")
    created, existing = [], []
    try:
        for topic in args.topics:
            try:
                admin.create_topics([NewTopic(topic, num_partitions=args.partitions,
                                              replication_factor=1)])
                created.append(topic)
            except TopicAlreadyExistsError:
                existing.append(topic)
    finally:
        admin.close()
    print(json.dumps({"created": created, "existing": existing, "partitions": args.partitions}))


if __name__ == "__main__":
    main()
