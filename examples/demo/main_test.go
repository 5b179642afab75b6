package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"attempt 1/4 failed (503), retrying in",
		"attempt 1/4 failed (429), retrying in 1s",
		"attempt 1/4 failed (reset), retrying in",
		"server received 2 attempt(s), 1 distinct Idempotency-Key",
		"retryhttp_giveups_total{reason=\"unsafe_method\"} 1",
		"retryhttp_giveups_total{reason=\"retry_after\"} 1",
		"retryhttp_giveups_total{reason=\"deadline\"} 1",
		"retryhttp_giveups_total{reason=\"attempts\"} 1",
		"retryhttp_requests_total{method=\"GET\"} 7",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "server received 1 attempt(s)\n"); n != 4 {
		t.Errorf("%d requests were not retried, want 4 (PATCH, 404, Retry-After cap, deadline):\n%s", n, s)
	}
}
