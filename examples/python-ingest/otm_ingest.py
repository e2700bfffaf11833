"""Send LLM usage records to otm-telemetry's batch endpoint, with the standard library only.

Records are queued in memory and sent in gzip batches of up to ``flush_at`` records
(``POST /v1/telemetry/usage/batch``). Each record carries its own ``idempotencyKey``
(a UUIDv7 given when it is recorded), so a batch sent again after a timeout, a 429, a 503
or a lost connection is stored once. After a 207 only the items answered 503 are sent
again; items refused (400, 422) are reported and dropped: sending them again cannot help.

    client = UsageClient("https://ingest.example.com", "otm_prod_...", ca_file="ca.pem")
    client.record({...})        # returns at once
    client.close()              # sends what is left, waits for it

A demonstration: ``python otm_ingest.py --url ... --key ... --records 250`` sends 250
generated records and prints what happened to them as JSON.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

BATCH_PATH = "/v1/telemetry/usage/batch"
RETRIABLE_STATUSES = {408, 429, 500, 502, 503, 504}


@dataclass
class Outcome:
    """What happened to the records so far."""

    accepted: int = 0
    refused: list[dict[str, Any]] = field(default_factory=list)
    gave_up: int = 0


class UsageClient:
    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        ca_file: str | None = None,
        flush_at: int = 500,
        flush_interval: float = 1.0,
        max_attempts: int = 8,
        timeout: float = 15.0,
    ) -> None:
        if not 1 <= flush_at <= 1000:
            raise ValueError("flush_at: 1 to 1000 (the endpoint takes at most 1,000 items)")
        self._endpoint = url.rstrip("/") + BATCH_PATH
        self._api_key = api_key
        self._context = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
        self._flush_at = flush_at
        self._flush_interval = flush_interval
        self._max_attempts = max_attempts
        self._timeout = timeout
        self._queue: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self.outcome = Outcome()
        self._sender = threading.Thread(target=self._run, name="otm-ingest", daemon=True)
        self._sender.start()

    def record(self, usage: dict[str, Any]) -> None:
        """Queues one usage record; it leaves with the next batch."""
        if self._closed:
            raise RuntimeError("the client is closed")
        item = dict(usage)
        item.setdefault("idempotencyKey", uuid7())
        with self._lock:
            self._queue.append(item)
            full = len(self._queue) >= self._flush_at
        if full:
            self._wake.set()

    def close(self) -> Outcome:
        """Sends what is queued, waits for it, and returns what happened to every record."""
        self._closed = True
        self._wake.set()
        self._sender.join()
        return self.outcome

    def _run(self) -> None:
        while True:
            self._wake.wait(self._flush_interval)
            self._wake.clear()
            while True:
                with self._lock:
                    batch, self._queue = self._queue[: self._flush_at], self._queue[self._flush_at :]
                if not batch:
                    break
                self._send(batch)
            if self._closed:
                with self._lock:
                    if not self._queue:
                        return

    def _send(self, items: list[dict[str, Any]]) -> None:
        """Sends one batch until every item is accepted, refused, or the attempts run out."""
        pending = items
        for attempt in range(self._max_attempts):
            status, body, retry_after = self._post(pending)
            if status in (202, 207, 400) and body is not None and "results" in body:
                again = []
                for result, item in zip(body["results"], pending):
                    if result["status"] == 202:
                        self.outcome.accepted += 1
                    elif result["status"] == 503:
                        again.append(item)
                    else:
                        self.outcome.refused.append({"idempotencyKey": item["idempotencyKey"], **result})
                pending = again
                if not pending:
                    return
            elif status not in RETRIABLE_STATUSES and status != 0:
                # 401, 413, 415: the whole request is refused; sending it again cannot help.
                for item in pending:
                    self.outcome.refused.append({"idempotencyKey": item["idempotencyKey"], "status": status, "body": body})
                return
            # Exponential backoff with jitter, at least what Retry-After asks.
            delay = max(retry_after or 0.0, min(30.0, 0.2 * 2**attempt) * (0.5 + random.random() / 2))
            time.sleep(delay)
        self.outcome.gave_up += len(pending)

    def _post(self, items: list[dict[str, Any]]) -> tuple[int, dict[str, Any] | None, float | None]:
        data = gzip.compress(json.dumps(items, separators=(",", ":")).encode(), compresslevel=1)
        request = urllib.request.Request(
            self._endpoint,
            data=data,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Content-Encoding": "gzip",
                "X-API-Key": self._api_key,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._context) as response:
                return response.status, json.loads(response.read() or b"null"), None
        except urllib.error.HTTPError as error:
            retry_after = error.headers.get("Retry-After")
            try:
                body = json.loads(error.read() or b"null")
            except ValueError:
                body = None
            return error.code, body, float(retry_after) if retry_after and retry_after.isdigit() else None
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            # No answer: the items may or may not be queued; their keys make a resend safe.
            return 0, None, None


def uuid7() -> str:
    """A UUIDv7 (RFC 9562): the milliseconds since the epoch in its first 48 bits, then random
    bits. Keys made one after the other sort in that order, which keeps the pipeline's look-up
    of a batch's keys before storing them to a few ranges of its key index instead of one per
    record. Python 3.14's ``uuid.uuid7()`` where there is one."""
    if hasattr(uuid, "uuid7"):
        return str(uuid.uuid7())
    value = bytearray((time.time_ns() // 1_000_000).to_bytes(6, "big") + random.SystemRandom().randbytes(10))
    value[6] = value[6] & 0x0F | 0x70
    value[8] = value[8] & 0x3F | 0x80
    return str(uuid.UUID(bytes=bytes(value)))


def sample_record(index: int, user: str) -> dict[str, Any]:
    start = datetime.now(timezone.utc) - timedelta(seconds=index)
    latency = 300 + index % 900
    return {
        "request": {"modelId": "gpt-4o-mini", "status": "success", "provider": "openai"},
        "user": {"id": user, "type": "external"},
        "tokens": {"input": 100 + index, "output": 20 + index % 50, "total": 120 + index + index % 50},
        "timing": {
            "startTime": start.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "firstTokenTime": (start + timedelta(milliseconds=latency // 3)).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "lastTokenTime": (start + timedelta(milliseconds=latency)).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "latencyMs": latency,
        },
        "io": {"prompt": f"Question {index}", "response": f"Answer {index}"},
        "context": {"feature": "python-ingest-example"},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description="Send generated usage records to otm-telemetry in batches.")
    parser.add_argument("--url", required=True, help="the gateway, e.g. https://localhost:8443")
    parser.add_argument("--key", required=True, help="an ingest API key (otm_<env>_...)")
    parser.add_argument("--ca-file", help="a CA certificate to trust (a private CA, or the local stack's self-signed certificate)")
    parser.add_argument("--records", type=int, default=100, help="how many records to send (default 100)")
    parser.add_argument("--user", default="python-example-user", help="the user id of the records")
    parser.add_argument("--flush-at", type=int, default=100, help="records per batch (default 100)")
    args = parser.parse_args()
    client = UsageClient(args.url, args.key, ca_file=args.ca_file, flush_at=args.flush_at)
    for index in range(args.records):
        client.record(sample_record(index, args.user))
    outcome = client.close()
    print(json.dumps({"accepted": outcome.accepted, "refused": len(outcome.refused), "gaveUp": outcome.gave_up}))
    if outcome.refused:
        print(f"first refusal: {json.dumps(outcome.refused[0])}", file=sys.stderr)
    return 0 if outcome.accepted == args.records else 1


if __name__ == "__main__":
    sys.exit(main())
