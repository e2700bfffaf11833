module otm-telemetry/examples/go-ingest

go 1.22
