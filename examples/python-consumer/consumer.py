"""Reads the usage topic through the schema registry, honours erasures, and prints token sums per model.

The way a data engineer reads the topic (docs/topic-contract.md): a consumer group
of its own, values decoded by the schema id in each message (the registry's wire
format), each message validated against the schema it was written with.

    python consumer.py --brokers 127.0.0.1:19092 \\
        --registry http://127.0.0.1:18081/apis/ccompat/v7 \\
        --topic telemetry.usage.v1 --group my-analysis --store usage.sqlite

The records it reads are kept in a SQLite store (--store; in memory when absent), one
row per event key, so a record read twice is held once. It also reads the erasure
topic (--erasures-topic, default `<topic>.erasures`): for each announcement it deletes
the held records of that environment and user received at or before `erasedAt`, and
remembers the erasure, so such a record that reaches it later from the usage topic
(the two topics are read side by side, in no set order) is dropped, not kept.

It reads from the earliest offset the group has not committed, and stops after
--idle-seconds without a new message (or at --max-messages). It prints one JSON
object: the token sums per model over what the store holds, {"<provider>/<model>":
{"records": n, "input": n, "output": n, "cachedInput": n, "reasoning": n}}, or with
--by-user the records held per `<environment>:<userId>`.
"""

import argparse
import json
import os
import sqlite3
import sys
import time
from datetime import datetime

from confluent_kafka import DeserializingConsumer, KafkaError
from confluent_kafka.error import ConsumeError
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import StringDeserializer

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    event_key TEXT PRIMARY KEY, environment TEXT NOT NULL, user_id TEXT NOT NULL, received_ms INTEGER NOT NULL,
    model TEXT NOT NULL, input INTEGER NOT NULL, output INTEGER NOT NULL, cached_input INTEGER NOT NULL,
    reasoning INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS records_by_user ON records (environment, user_id);
CREATE TABLE IF NOT EXISTS erasures (
    environment TEXT NOT NULL, user_id TEXT NOT NULL, erased_ms INTEGER NOT NULL, PRIMARY KEY (environment, user_id)
);
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default="127.0.0.1:19092")
    parser.add_argument("--registry", default="http://127.0.0.1:18081/apis/ccompat/v7")
    parser.add_argument("--topic", default="telemetry.usage.v1")
    parser.add_argument("--erasures-topic", default=None, help="default: <topic>.erasures")
    parser.add_argument("--group", default="python-consumer-example")
    parser.add_argument("--store", default=":memory:", help="SQLite file holding what was read (default: memory)")
    parser.add_argument("--by-user", action="store_true", help="print the records held per environment and user")
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--max-messages", type=int, default=0, help="stop after this many (0: no limit)")
    return parser.parse_args()


def epoch_ms(rfc3339: str) -> int:
    """RFC 3339 to epoch milliseconds (Python 3.11+ reads a trailing Z)."""
    return int(datetime.fromisoformat(rfc3339.replace("z", "Z")).timestamp() * 1000)


def keep_record(db: sqlite3.Connection, queued: dict) -> None:
    meta, record = queued["meta"], queued["record"]
    environment, user_id = meta["environment"], record["user"]["id"]
    received_ms = epoch_ms(meta["receivedAt"])
    erased = db.execute(
        "SELECT erased_ms FROM erasures WHERE environment = ? AND user_id = ?", (environment, user_id)
    ).fetchone()
    if erased is not None and received_ms <= erased[0]:
        return  # erased before it reached us
    tokens = record.get("tokens", {})
    db.execute(
        "INSERT OR IGNORE INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            meta["eventKey"],
            environment,
            user_id,
            received_ms,
            f'{record["request"]["provider"]}/{record["request"]["modelId"]}',
            tokens.get("input", 0),
            tokens.get("output", 0),
            tokens.get("cachedInput", 0),
            tokens.get("reasoning", 0),
        ),
    )


def apply_erasure(db: sqlite3.Connection, announcement: dict) -> None:
    environment, user_id = announcement["environment"], announcement["userId"]
    erased_ms = epoch_ms(announcement["erasedAt"])
    db.execute(
        "INSERT INTO erasures VALUES (?, ?, ?) ON CONFLICT (environment, user_id) "
        "DO UPDATE SET erased_ms = max(erased_ms, excluded.erased_ms)",
        (environment, user_id, erased_ms),
    )
    db.execute(
        "DELETE FROM records WHERE environment = ? AND user_id = ? AND received_ms <= ?",
        (environment, user_id, erased_ms),
    )


def report(db: sqlite3.Connection, by_user: bool) -> dict:
    if by_user:
        rows = db.execute(
            "SELECT environment || ':' || user_id, count(*) FROM records GROUP BY 1 ORDER BY 1"
        ).fetchall()
        return {user: n for user, n in rows}
    rows = db.execute(
        "SELECT model, count(*), sum(input), sum(output), sum(cached_input), sum(reasoning) "
        "FROM records GROUP BY model ORDER BY model"
    ).fetchall()
    return {
        model: {"records": n, "input": i, "output": o, "cachedInput": c, "reasoning": r}
        for model, n, i, o, c, r in rows
    }



def kafka_security() -> dict:
    """librdkafka settings from the variables the project's services read (docs/production.md).

    KAFKA_SECURITY_PROTOCOL (PLAINTEXT, SSL, SASL_SSL), KAFKA_SASL_MECHANISM (PLAIN,
    SCRAM-SHA-256, SCRAM-SHA-512), KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD,
    KAFKA_TLS_CA_FILE, and for mTLS KAFKA_TLS_CERT_FILE with KAFKA_TLS_KEY_FILE.
    """
    env = os.environ
    settings = {"security.protocol": env.get("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT")}
    for variable, key in (
        ("KAFKA_SASL_MECHANISM", "sasl.mechanism"),
        ("KAFKA_SASL_USERNAME", "sasl.username"),
        ("KAFKA_SASL_PASSWORD", "sasl.password"),
        ("KAFKA_TLS_CA_FILE", "ssl.ca.location"),
        ("KAFKA_TLS_CERT_FILE", "ssl.certificate.location"),
        ("KAFKA_TLS_KEY_FILE", "ssl.key.location"),
    ):
        if env.get(variable):
            settings[key] = env[variable]
    return settings


def registry_settings(url: str) -> dict:
    """The registry client's settings: basic auth and a private CA from SCHEMA_REGISTRY_USERNAME, _PASSWORD, _CA_FILE."""
    env = os.environ
    settings = {"url": url}
    if env.get("SCHEMA_REGISTRY_USERNAME"):
        settings["basic.auth.user.info"] = f"{env['SCHEMA_REGISTRY_USERNAME']}:{env.get('SCHEMA_REGISTRY_PASSWORD', '')}"
    if env.get("SCHEMA_REGISTRY_CA_FILE"):
        settings["ssl.ca.location"] = env["SCHEMA_REGISTRY_CA_FILE"]
    return settings

def main() -> None:
    args = parse_args()
    erasures_topic = args.erasures_topic or f"{args.topic}.erasures"
    db = sqlite3.connect(args.store)
    db.executescript(SCHEMA)
    registry = SchemaRegistryClient(registry_settings(args.registry))
    consumer = DeserializingConsumer(
        {
            "bootstrap.servers": args.brokers,
            **kafka_security(),
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            # Offsets are committed after the store (at-least-once; a record read
            # twice is held once, by its event key).
            "enable.auto.commit": False,
            "key.deserializer": StringDeserializer("utf_8"),
            # No schema given: each value is read with the schema its id names.
            "value.deserializer": JSONDeserializer(None, schema_registry_client=registry),
        }
    )
    consumer.subscribe([args.topic, erasures_topic])
    read = 0
    last_message = time.monotonic()
    try:
        while time.monotonic() - last_message < args.idle_seconds:
            try:
                message = consumer.poll(0.5)
            except ConsumeError as error:
                if error.code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue  # the erasure topic before the first erasure: read once it exists
                raise
            if message is None:
                continue
            if message.error():
                print(f"kafka: {message.error()}", file=sys.stderr)
                continue
            last_message = time.monotonic()
            if message.value() is not None:
                if message.topic() == erasures_topic:
                    apply_erasure(db, message.value())
                else:
                    keep_record(db, message.value())
            db.commit()
            consumer.commit(message=message, asynchronous=True)
            read += 1
            if args.max_messages and read >= args.max_messages:
                break
    finally:
        try:
            consumer.commit(asynchronous=False)
        except Exception:  # nothing read, or the group is rebalancing: offsets come again, held once
            pass
        consumer.close()
    print(json.dumps(report(db, args.by_user), indent=None))
    db.close()


if __name__ == "__main__":
    main()
