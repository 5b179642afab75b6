package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retryhttp/retryhttp"
)

// A flaky server answers 503 twice, then 200; the client sees only the 200.
func ExampleNew() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	client := &http.Client{Transport: retryhttp.New(nil,
		retryhttp.WithBackoff(retryhttp.FullJitter(10*time.Millisecond, 100*time.Millisecond)))}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", n.Load(), "attempts")
	// Output: 200 hello after 3 attempts
}

// With WithIdempotencyKeys, a POST is retried under one key, so that a
// server that deduplicates by key charges once. Without a key, a POST that
// reached the server is never sent again.
func ExampleWithIdempotencyKeys() {
	keys := map[string]int{}
	var attempts int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts++
		keys[r.Header.Get("Idempotency-Key")]++
		if attempts == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "charged")
	}))
	defer srv.Close()

	client := retryhttp.NewClient(retryhttp.WithIdempotencyKeys(), retryhttp.WithBackoff(retryhttp.Constant(0)))
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"amount":100}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", attempts, "attempts with", len(keys), "key")

	attempts = 0
	plain := retryhttp.NewClient(retryhttp.WithBackoff(retryhttp.Constant(0)))
	resp, err = plain.Post(srv.URL, "application/json", strings.NewReader(`{"amount":100}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", attempts, "attempt without a key")
	// Output:
	// 200 after 2 attempts with 1 key
	// 503 after 1 attempt without a key
}

// Retry-After stretches the wait: the retry comes no sooner than asked.
func ExampleParseRetryAfter() {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Wed, 02 Dec 2026 10:00:30 GMT", "Tue, 01 Dec 2026 10:00:00 GMT", "soon"} {
		d, ok := retryhttp.ParseRetryAfter(v, now)
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "120": 2m0s true
	// "Wed, 02 Dec 2026 10:00:30 GMT": 30s true
	// "Tue, 01 Dec 2026 10:00:00 GMT": 0s true
	// "soon": 0s false
}

// The attempt hook sees each attempt start (a retry with the wait it had)
// and end (its outcome, and whether another follows): the place for a
// tracing span per attempt (otelretry is built on it) or a counter of
// one's own.
func ExampleWithAttemptHook() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	client := retryhttp.NewClient(
		retryhttp.WithBackoff(retryhttp.Constant(5*time.Millisecond)),
		retryhttp.WithAttemptHook(func(ctx context.Context, a retryhttp.AttemptStart) (context.Context, func(retryhttp.AttemptEnd)) {
			fmt.Printf("attempt %d of %d, after %v\n", a.Attempt, a.MaxAttempts, a.Delay)
			return ctx, func(e retryhttp.AttemptEnd) {
				fmt.Printf("  ended %s, retried: %v\n", e.Outcome, e.Retried)
			}
		}))
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output:
	// attempt 1 of 4, after 0s
	//   ended 429, retried: true
	// attempt 2 of 4, after 5ms
	//   ended 200, retried: false
	// 200 OK
}

// The zero Transport retries with the defaults, over a pooled transport
// that every zero Transport shares, as the zero http.Client does.
func ExampleTransport_zero() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	client := &http.Client{Transport: &retryhttp.Transport{}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", n.Load(), "attempts")
	// Output: 200 after 2 attempts
}

// With FailFast, a host whose breaker is open refuses requests at once, so
// that the caller can serve a fallback instead of waiting.
func ExampleWithRetryBreaker_failFast() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	client := retryhttp.NewClient(
		retryhttp.WithMaxAttempts(1),
		retryhttp.WithRetryBreaker(retryhttp.BreakerConfig{FailFast: true, Threshold: 3}))
	for i := 1; i <= 4; i++ {
		// A moment apart: failures that all come in one instant (10ms)
		// open no breaker.
		time.Sleep(10 * time.Millisecond)
		resp, err := client.Get(srv.URL)
		switch {
		case errors.Is(err, retryhttp.ErrCircuitOpen):
			fmt.Println(i, "circuit open: serve the fallback")
		case err != nil:
			fmt.Println(i, err)
		default:
			resp.Body.Close()
			fmt.Println(i, resp.StatusCode)
		}
	}
	// Output:
	// 1 503
	// 2 503
	// 3 503
	// 4 circuit open: serve the fallback
}

// Metrics is a Prometheus collector: register it, then read the series.
func ExampleMetrics() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	m := retryhttp.NewMetrics()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	client := retryhttp.NewClient(retryhttp.WithMetrics(m), retryhttp.WithName("rates"),
		retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond)))
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	// Scrape it as Prometheus would, and print the counters that moved.
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasSuffix(line, "_total") || !strings.Contains(line, "_total{") || strings.HasSuffix(line, " 0") {
			continue
		}
		fmt.Println(line)
	}
	// Output:
	// retryhttp_attempts_total{name="rates",outcome="200"} 1
	// retryhttp_attempts_total{name="rates",outcome="503"} 1
	// retryhttp_requests_total{criticality="default",method="GET",name="rates"} 1
	// retryhttp_retries_total{criticality="default",name="rates",outcome="503"} 1
}

// One Budget shared by several Transports makes them spend one allowance
// per host: here, none at all, so neither client retries.
func ExampleNewBudget_shared() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	shared := retryhttp.NewBudget(0, 0)
	a := retryhttp.NewClient(retryhttp.WithBudget(shared))
	b := retryhttp.NewClient(retryhttp.WithBudget(shared))
	for _, c := range []*http.Client{a, b} {
		resp, err := c.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	fmt.Println(n.Load(), "attempts for 2 requests")
	// Output: 2 attempts for 2 requests
}
