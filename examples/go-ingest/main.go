package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"
)

// A demonstration: sends generated records and prints what happened to them as JSON.
//
//	go run . -url https://localhost:8443 -key otm_dev_... -ca-file ../../.stack/tls/localhost.crt -records 250
func main() {
	url := flag.String("url", "", "the gateway, e.g. https://localhost:8443 (required)")
	key := flag.String("key", "", "an ingest API key, otm_<env>_... (required)")
	caFile := flag.String("ca-file", "", "a CA certificate to trust (a private CA, or the local stack's self-signed certificate)")
	records := flag.Int("records", 100, "how many records to send")
	user := flag.String("user", "go-example-user", "the user id of the records")
	flushAt := flag.Int("flush-at", 100, "records per batch")
	flag.Parse()
	if *url == "" || *key == "" {
		flag.Usage()
		os.Exit(2)
	}
	client, err := NewClient(*url, *key, Options{CAFile: *caFile, FlushAt: *flushAt})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; i < *records; i++ {
		start := time.Now().UTC().Add(-time.Duration(i) * time.Second)
		latency := 300 + i%900
		_ = client.Record(Record{
			"request": map[string]any{"modelId": "gpt-4o-mini", "status": "success", "provider": "openai"},
			"user":    map[string]any{"id": *user, "type": "external"},
			"tokens":  map[string]any{"input": 100 + i, "output": 20 + i%50, "total": 120 + i + i%50},
			"timing": map[string]any{
				"startTime":      start.Format("2006-01-02T15:04:05.000Z"),
				"firstTokenTime": start.Add(time.Duration(latency/3) * time.Millisecond).Format("2006-01-02T15:04:05.000Z"),
				"lastTokenTime":  start.Add(time.Duration(latency) * time.Millisecond).Format("2006-01-02T15:04:05.000Z"),
				"latencyMs":      latency,
			},
			"io":      map[string]any{"prompt": fmt.Sprintf("Question %d", i), "response": fmt.Sprintf("Answer %d", i)},
			"context": map[string]any{"feature": "go-ingest-example"},
		})
	}
	outcome := client.Close()
	summary, _ := json.Marshal(map[string]int{"accepted": outcome.Accepted, "refused": len(outcome.Refused), "gaveUp": outcome.GaveUp})
	fmt.Println(string(summary))
	if len(outcome.Refused) > 0 {
		first, _ := json.Marshal(outcome.Refused[0])
		fmt.Fprintf(os.Stderr, "first refusal: %s\n", first)
	}
	if outcome.Accepted != *records {
		os.Exit(1)
	}
}
