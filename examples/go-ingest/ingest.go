// Package main sends LLM usage records to otm-telemetry's batch endpoint with the
// standard library only.
//
// Records are queued and sent in gzip batches of up to FlushAt records
// (POST /v1/telemetry/usage/batch). Each record carries its own idempotencyKey (a UUIDv7
// given when it is recorded), so a batch sent again after a timeout, a 429, a 503 or
// a lost connection is stored once. After a 207 only the items answered 503 are sent
// again; items refused (400, 422) are reported and dropped: sending them again cannot help.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mathrand "math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

const batchPath = "/v1/telemetry/usage/batch"

// Record is one usage record as the ingest API takes it (see the project's docs/ingest-api.md).
type Record map[string]any

// Refusal is an item the gateway refused, with its answer.
type Refusal struct {
	IdempotencyKey string `json:"idempotencyKey"`
	Status         int    `json:"status"`
	ErrorType      string `json:"errorType,omitempty"`
	Message        string `json:"message,omitempty"`
}

// Outcome says what happened to the records so far.
type Outcome struct {
	Accepted int
	Refused  []Refusal
	GaveUp   int
}

// Options of a Client; zero values take the defaults.
type Options struct {
	CAFile        string        // a CA certificate to trust, PEM (a private CA, or the local stack's certificate)
	FlushAt       int           // records per batch, 1 to 1000 (default 500)
	FlushInterval time.Duration // the longest a record waits (default 1 s)
	MaxAttempts   int           // sends of one batch before its items are given up (default 8)
	Timeout       time.Duration // per request (default 15 s)
}

// Client queues records and sends them in batches from one goroutine.
type Client struct {
	endpoint, apiKey string
	http             *http.Client
	opts             Options
	mu               sync.Mutex
	queue            []Record
	wake             chan struct{}
	done             chan struct{}
	closed           bool
	outcome          Outcome
}

// NewClient starts a client sending to the gateway at url with an ingest API key.
func NewClient(url, apiKey string, opts Options) (*Client, error) {
	if opts.FlushAt == 0 {
		opts.FlushAt = 500
	}
	if opts.FlushAt < 1 || opts.FlushAt > 1000 {
		return nil, errors.New("FlushAt: 1 to 1000 (the endpoint takes at most 1,000 items)")
	}
	if opts.FlushInterval == 0 {
		opts.FlushInterval = time.Second
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 8
	}
	if opts.Timeout == 0 {
		opts.Timeout = 15 * time.Second
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", opts.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c := &Client{
		endpoint: strings.TrimRight(url, "/") + batchPath,
		apiKey:   apiKey,
		http:     &http.Client{Transport: transport, Timeout: opts.Timeout},
		opts:     opts,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	go c.run()
	return c, nil
}

// Record queues one usage record; it leaves with the next batch.
func (c *Client) Record(r Record) error {
	item := Record{}
	for k, v := range r {
		item[k] = v
	}
	if _, ok := item["idempotencyKey"]; !ok {
		item["idempotencyKey"] = newUUID()
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errors.New("the client is closed")
	}
	c.queue = append(c.queue, item)
	full := len(c.queue) >= c.opts.FlushAt
	c.mu.Unlock()
	if full {
		c.signal()
	}
	return nil
}

// Close sends what is queued, waits for it, and returns what happened to every record.
func (c *Client) Close() Outcome {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.signal()
	<-c.done
	return c.outcome
}

func (c *Client) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Client) run() {
	defer close(c.done)
	timer := time.NewTicker(c.opts.FlushInterval)
	defer timer.Stop()
	for {
		select {
		case <-c.wake:
		case <-timer.C:
		}
		for {
			c.mu.Lock()
			n := min(len(c.queue), c.opts.FlushAt)
			batch := c.queue[:n:n]
			c.queue = c.queue[n:]
			closed := c.closed
			c.mu.Unlock()
			if n == 0 {
				if closed {
					return
				}
				break
			}
			c.send(batch)
		}
	}
}

type batchAnswer struct {
	Results []struct {
		Status    int    `json:"status"`
		ErrorType string `json:"errorType"`
		Message   string `json:"message"`
	} `json:"results"`
}

// send sends one batch until every item is accepted, refused, or the attempts run out.
func (c *Client) send(items []Record) {
	pending := items
	for attempt := 0; attempt < c.opts.MaxAttempts; attempt++ {
		status, answer, retryAfter := c.post(pending)
		switch {
		case (status == 202 || status == 207 || status == 400) && answer != nil && len(answer.Results) == len(pending):
			var again []Record
			for i, result := range answer.Results {
				key, _ := pending[i]["idempotencyKey"].(string)
				switch result.Status {
				case 202:
					c.outcome.Accepted++
				case 503:
					again = append(again, pending[i])
				default:
					c.outcome.Refused = append(c.outcome.Refused, Refusal{key, result.Status, result.ErrorType, result.Message})
				}
			}
			if pending = again; len(pending) == 0 {
				return
			}
		case status != 0 && status != 408 && status != 429 && status < 500:
			// 401, 413, 415: the whole request is refused; sending it again cannot help.
			for _, item := range pending {
				key, _ := item["idempotencyKey"].(string)
				c.outcome.Refused = append(c.outcome.Refused, Refusal{IdempotencyKey: key, Status: status})
			}
			return
		}
		// Exponential backoff with jitter, at least what Retry-After asks.
		delay := time.Duration(math.Min(30, 0.2*math.Pow(2, float64(attempt))) * (0.5 + mathrand.Float64()/2) * float64(time.Second))
		time.Sleep(max(delay, retryAfter))
	}
	c.outcome.GaveUp += len(pending)
}

func (c *Client) post(items []Record) (int, *batchAnswer, time.Duration) {
	var body bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&body, gzip.BestSpeed)
	if err := json.NewEncoder(zw).Encode(items); err != nil {
		return 0, nil, 0
	}
	zw.Close()
	request, err := http.NewRequest(http.MethodPost, c.endpoint, &body)
	if err != nil {
		return 0, nil, 0
	}
	request.Header.Set("Content-Type", "application/json")
	request.Header.Set("Content-Encoding", "gzip")
	request.Header.Set("X-API-Key", c.apiKey)
	response, err := c.http.Do(request)
	if err != nil {
		// No answer: the items may or may not be queued; their keys make a resend safe.
		return 0, nil, 0
	}
	defer response.Body.Close()
	var retryAfter time.Duration
	if seconds, err := strconv.Atoi(response.Header.Get("Retry-After")); err == nil {
		retryAfter = time.Duration(seconds) * time.Second
	}
	raw, _ := io.ReadAll(io.LimitReader(response.Body, 64<<20))
	var answer batchAnswer
	if json.Unmarshal(raw, &answer) != nil {
		return response.StatusCode, nil, retryAfter
	}
	return response.StatusCode, &answer, retryAfter
}

// newUUID returns a UUIDv7 (RFC 9562): the milliseconds since the epoch in its first 48
// bits, then random bits. Keys made one after the other sort in that order, which keeps
// the pipeline's look-up of a batch's keys before storing them to a few ranges of its
// key index instead of one per record.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	ms := uint64(time.Now().UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
