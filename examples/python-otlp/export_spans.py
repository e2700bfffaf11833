"""Sends GenAI spans to otm-telemetry with the OpenTelemetry SDK's OTLP/HTTP exporter.

An application instrumented with OpenTelemetry needs nothing of otm-telemetry but the
base URL and an ingest key: each span with gen_ai.* attributes (the GenAI semantic
conventions) becomes one usage record. This example makes the spans by hand, as an
instrumentation library would, and exports them with protobuf and gzip.

    python export_spans.py --endpoint https://127.0.0.1:8443/v1/otlp --api-key otm_... \
        --ca-file .stack/tls/localhost.crt --calls 3 --run-id demo

It prints one JSON line: the trace id and span ids of the LLM calls it exported, and
the id of a span without GenAI attributes (which otm-telemetry ignores). With
--exports 2 it sends the same spans twice, as an exporter retrying does: otm-telemetry
stores them once.
"""

import argparse
import json
import time

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", required=True, help="the gateway's OTLP base URL, e.g. https://127.0.0.1:8443/v1/otlp")
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--ca-file", help="certificate to trust (the local stack's is self-signed)")
    parser.add_argument("--calls", type=int, default=3, help="LLM calls to record (one of them fails)")
    parser.add_argument("--run-id", default="example", help="user id suffix, to find the records again")
    parser.add_argument("--exports", type=int, default=1, help="send the same spans this many times, as a retrying exporter does")
    args = parser.parse_args()

    exporter = OTLPSpanExporter(
        endpoint=f"{args.endpoint.rstrip('/')}/v1/traces",
        headers={"x-api-key": args.api_key},
        certificate_file=args.ca_file,
        compression=Compression.Gzip,
    )
    provider = TracerProvider(
        resource=Resource.create({"service.name": "python-otlp-example", "deployment.environment.name": "qa"})
    )
    # The spans are kept as they end, then exported (an application would put a
    # BatchSpanProcessor(exporter) here instead).
    finished = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(finished))
    tracer = provider.get_tracer("otm-telemetry.examples.python-otlp")

    exported = {"traceIds": [], "spanIds": [], "ignoredSpanId": None}
    with tracer.start_as_current_span("handle request") as parent:
        exported["ignoredSpanId"] = format(parent.get_span_context().span_id, "016x")
        for call in range(args.calls):
            start = time.time_ns()
            span = tracer.start_span(
                "chat gpt-4o-mini",
                start_time=start,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": 100 + call,
                    "gen_ai.usage.output_tokens": 20 + call,
                    "user.id": f"py-otlp-{args.run_id}",
                },
            )
            span.add_event("gen_ai.first_token", timestamp=start + 150_000_000)
            if call == args.calls - 1:
                span.set_attribute("error.type", "timeout")
                span.set_status(Status(StatusCode.ERROR, "upstream timed out"))
            span.end(end_time=start + 900_000_000)
            context = span.get_span_context()
            exported["traceIds"].append(format(context.trace_id, "032x"))
            exported["spanIds"].append(format(context.span_id, "016x"))
    for _ in range(args.exports):
        if exporter.export(finished.get_finished_spans()) != SpanExportResult.SUCCESS:
            raise SystemExit("the export failed")
    exporter.shutdown()
    provider.shutdown()
    print(json.dumps(exported))


if __name__ == "__main__":
    main()
