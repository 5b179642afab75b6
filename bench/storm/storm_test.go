package main

import (
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

// The engine counts what the server receives: a contender that never
// retries sends exactly one attempt per request, and none succeeds while
// the server is down.
func TestStormAccounting(t *testing.T) {
	sc := Scenario{Name: "smoke", Shape: "burst", N: 100, Outage: 300 * time.Millisecond,
		Capacity: 50, Work: time.Millisecond, Timeout: 10 * time.Second}
	r, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	if r.Attempts != 100 || r.Successes != 0 || r.Requests != 100 || r.OutageAttempts != 100 {
		t.Errorf("bare: %+v; want 100 attempts in the outage, no success", r)
	}
	r, err = Run(sc, bench.RetryHTTP)
	if err != nil {
		t.Fatal(err)
	}
	if r.Successes != 100 || r.Amplification() > 2.5 {
		t.Errorf("retryhttp: %d of 100 succeeded at %.2fx; want all, at most 2.5x", r.Successes, r.Amplification())
	}
}

func TestSteadyShape(t *testing.T) {
	sc := Scenario{Name: "smoke-steady", Shape: "steady", Rate: 100, Warmup: 300 * time.Millisecond,
		Outage: 200 * time.Millisecond, Recovery: 300 * time.Millisecond, Capacity: 50, Work: time.Millisecond, Timeout: 10 * time.Second}
	r, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 80 || r.OutageRequests < 15 || r.OutageRequests > 25 || r.Successes != r.Requests-r.OutageRequests {
		t.Errorf("bare steady: %d requests, %d in the outage, %d ok; want 80, about 20, the rest", r.Requests, r.OutageRequests, r.Successes)
	}
}

func TestRetryAfterSpread(t *testing.T) {
	if got := retryAfter("3"); got != "3" {
		t.Errorf(`retryAfter("3") = %q`, got)
	}
	seen := map[string]bool{}
	for range 1000 {
		v := retryAfter("3-6")
		if v != "3" && v != "4" && v != "5" && v != "6" {
			t.Fatalf(`retryAfter("3-6") = %q, want a whole number in [3, 6]`, v)
		}
		seen[v] = true
	}
	if len(seen) != 4 {
		t.Errorf(`retryAfter("3-6") gave only %v in 1000 draws`, seen)
	}
}
