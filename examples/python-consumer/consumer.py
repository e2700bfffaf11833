"""Reads the usage topic through the schema registry and prints token sums per model.

The way a data engineer reads the topic (docs/topic-contract.md): a consumer group
of its own, values decoded by the schema id in each message (the registry's wire
format), each message validated against the schema it was written with.

    python consumer.py --brokers 127.0.0.1:19092 \\
        --registry http://127.0.0.1:18081/apis/ccompat/v7 \\
        --topic telemetry.usage.v1 --group my-analysis

It reads from the earliest offset the group has not committed, and stops after
--idle-seconds without a new message (or at --max-messages). The sums are printed as
one JSON object: {"<provider>/<model>": {"records": n, "input": n, "output": n,
"cachedInput": n, "reasoning": n}}.
"""

import argparse
import json
import sys
import time
from collections import defaultdict

from confluent_kafka import DeserializingConsumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import StringDeserializer


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default="127.0.0.1:19092")
    parser.add_argument("--registry", default="http://127.0.0.1:18081/apis/ccompat/v7")
    parser.add_argument("--topic", default="telemetry.usage.v1")
    parser.add_argument("--group", default="python-consumer-example")
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--max-messages", type=int, default=0, help="stop after this many (0: no limit)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    registry = SchemaRegistryClient({"url": args.registry})
    consumer = DeserializingConsumer(
        {
            "bootstrap.servers": args.brokers,
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "key.deserializer": StringDeserializer("utf_8"),
            # No schema given: each value is read with the schema its id names.
            "value.deserializer": JSONDeserializer(None, schema_registry_client=registry),
        }
    )
    consumer.subscribe([args.topic])
    sums: dict = defaultdict(lambda: {"records": 0, "input": 0, "output": 0, "cachedInput": 0, "reasoning": 0})
    read = 0
    last_message = time.monotonic()
    try:
        while time.monotonic() - last_message < args.idle_seconds:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                print(f"kafka: {message.error()}", file=sys.stderr)
                continue
            last_message = time.monotonic()
            record = message.value()["record"]
            tokens = record.get("tokens", {})
            model = f'{record["request"]["provider"]}/{record["request"]["modelId"]}'
            entry = sums[model]
            entry["records"] += 1
            entry["input"] += tokens.get("input", 0)
            entry["output"] += tokens.get("output", 0)
            entry["cachedInput"] += tokens.get("cachedInput", 0)
            entry["reasoning"] += tokens.get("reasoning", 0)
            read += 1
            if args.max_messages and read >= args.max_messages:
                break
    finally:
        consumer.close()
    print(json.dumps(dict(sorted(sums.items())), indent=None))


if __name__ == "__main__":
    main()
