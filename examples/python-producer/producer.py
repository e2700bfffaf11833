"""Writes usage records straight to the usage topic, the documented way for a direct
producer (docs/topic-contract.md, "Direct producers"): backfills, other languages.

    python producer.py --brokers 127.0.0.1:19092 \\
        --registry http://127.0.0.1:18081/apis/ccompat/v7 \\
        --topic telemetry.usage.v1 --count 100 --producer-name backfill-2026-11

What it does, rule by rule:
- validates each record with the record schema (schemas/usage-record.schema.json)
  and format checking, the same verdict the gateway's validator gives;
- wraps it in the envelope {meta, record}: `gatewayId` is `direct:<name>` (rows from
  direct producers are told apart by it), `apiKeyId` names the producer, never a
  real ingest key's id; `eventKey` is the Kafka key and the dedupe key: stable per
  record (a retry or a re-run writes the same key, so nothing counts twice) and
  without a colon (keys with a colon are the gateways' `<apiKeyId>:<key>`);
- serialises with the topic's registered schema (the subject `<topic>-value`,
  never registering one of its own) in the registry's wire format;
- partitions like the gateways (murmur2 of the key: `partitioner=murmur2_random`),
  so one key always lands on one partition;
- sets the headers the gateways set (content-type, x-schema-id, x-request-id);
- waits for every message to be acknowledged by all in-sync replicas (acks=all,
  idempotent producer) and exits non-zero if any was not.

Prints one JSON object: {"produced": n, "eventKeys": [...], "sums": {...}}.
"""

import argparse
import datetime
import json
import os
import pathlib
import random
import sys
import uuid

import jsonschema
from confluent_kafka import SerializingProducer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import StringSerializer

HERE = pathlib.Path(__file__).resolve().parent
SCHEMAS = HERE.parent.parent / "schemas"
CONTENT_TYPE = "application/json; framing=schema-registry"
MODELS = [("openai", "gpt-4o"), ("anthropic", "claude-sonnet-4"), ("google", "gemini-2.5-pro")]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default="127.0.0.1:19092")
    parser.add_argument("--registry", default="http://127.0.0.1:18081/apis/ccompat/v7")
    parser.add_argument("--topic", default="telemetry.usage.v1")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--producer-name", default="python-example", help="names the producer in meta (no colon)")
    parser.add_argument("--environment", default="dev", choices=["prod", "qa", "preview", "dev"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--compression",
        default="none",
        choices=["none", "gzip", "snappy", "lz4", "zstd"],
        help="compression.type of the batches (the ingester reads every codec)",
    )
    return parser.parse_args()


def rfc3339(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sample_record(index: int, rng: random.Random, now: datetime.datetime) -> dict:
    provider, model = MODELS[index % len(MODELS)]
    start = now - datetime.timedelta(minutes=5, seconds=index)
    first = start + datetime.timedelta(milliseconds=rng.randint(150, 900))
    last = first + datetime.timedelta(milliseconds=rng.randint(200, 4000))
    input_tokens = rng.randint(200, 20000)
    output_tokens = rng.randint(20, 2000)
    tokens = {"input": input_tokens, "output": output_tokens, "cachedInput": input_tokens // 2}
    if provider != "anthropic":
        tokens["reasoning"] = output_tokens // 4
    return {
        "request": {"modelId": model, "provider": provider, "status": "success"},
        "user": {"id": f"backfill-user-{index % 7}", "type": "internal"},
        "tokens": tokens,
        "timing": {"startTime": rfc3339(start), "firstTokenTime": rfc3339(first), "lastTokenTime": rfc3339(last)},
        "io": {},
        "context": {"source": "python-producer-example"},
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
    if ":" in args.producer_name:
        sys.exit("--producer-name must not contain a colon")
    record_schema = json.loads((SCHEMAS / "usage-record.schema.json").read_text(encoding="utf-8"))
    envelope_schema = (SCHEMAS / "queued-record.schema.json").read_text(encoding="utf-8")
    validator_class = jsonschema.validators.validator_for(record_schema)
    record_validator = validator_class(record_schema, format_checker=validator_class.FORMAT_CHECKER)

    registry = SchemaRegistryClient(registry_settings(args.registry))
    subject = f"{args.topic}-value"
    # The topic's schema as the gateways registered it; this producer never registers one.
    schema_id = registry.get_latest_version(subject).schema_id
    value_serializer = JSONSerializer(
        envelope_schema,
        registry,
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    producer = SerializingProducer(
        {
            "bootstrap.servers": args.brokers,
            **kafka_security(),
            "acks": "all",
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            "compression.type": args.compression,
            "key.serializer": StringSerializer("utf_8"),
            "value.serializer": value_serializer,
        }
    )

    rng = random.Random(args.seed)
    now = datetime.datetime.now(datetime.timezone.utc)
    failures: list = []
    event_keys: list = []
    sums: dict = {}

    def delivered(error, message) -> None:
        if error is not None:
            failures.append(str(error))

    for index in range(args.count):
        record = sample_record(index, rng, now)
        errors = sorted(record_validator.iter_errors(record), key=lambda error: list(error.path))
        if errors:
            sys.exit(f"record {index} is invalid: {errors[0].json_path} {errors[0].message}")
        event_key = f"{args.producer_name}-{args.seed}-{index:06d}"
        request_id = str(uuid.uuid4())
        envelope = {
            "meta": {
                "requestId": request_id,
                "eventKey": event_key,
                "receivedAt": rfc3339(now),
                "apiKeyId": f"direct:{args.producer_name}",
                "environment": args.environment,
                "idempotencyKey": None,
                "gatewayId": f"direct:{args.producer_name}",
                "capture": {"policy": "full"},
            },
            "record": record,
        }
        producer.produce(
            topic=args.topic,
            key=event_key,
            value=envelope,
            headers={"content-type": CONTENT_TYPE, "x-schema-id": str(schema_id), "x-request-id": request_id},
            on_delivery=delivered,
        )
        producer.poll(0)
        event_keys.append(event_key)
        model = f'{record["request"]["provider"]}/{record["request"]["modelId"]}'
        entry = sums.setdefault(model, {"records": 0, "input": 0, "output": 0})
        entry["records"] += 1
        entry["input"] += record["tokens"]["input"]
        entry["output"] += record["tokens"]["output"]

    left = producer.flush(30)
    if left or failures:
        sys.exit(f"{left} messages not delivered, {len(failures)} failed: {failures[:3]}")
    print(json.dumps({"produced": len(event_keys), "eventKeys": event_keys, "sums": dict(sorted(sums.items()))}))


if __name__ == "__main__":
    main()
