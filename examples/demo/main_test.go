package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"attempt 1/4 failed (503), retried after",
		"attempt 1/4 failed (429), retried after 1",
		"attempt 1/4 failed (reset), retried after",
		"server received 2 attempt(s), 1 distinct Idempotency-Key",
		"retryhttp_giveups_total{criticality=\"default\",reason=\"unsafe_method\"} 1",
		"retryhttp_giveups_total{criticality=\"default\",reason=\"retry_after\"} 1",
		"retryhttp_giveups_total{criticality=\"default\",reason=\"deadline\"} 1",
		"retryhttp_giveups_total{criticality=\"default\",reason=\"attempts\"} 1",
		"retryhttp_requests_total{criticality=\"default\",method=\"GET\"} 7",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q:\n%s", want, s)
		}
	}
	// Retry-After: 1 is waited at least, and at most 20% more.
	if m := regexp.MustCompile(`failed \(429\), retried after (\S+)`).FindStringSubmatch(s); m == nil {
		t.Errorf("no retry after the 429:\n%s", s)
	} else if d, err := time.ParseDuration(m[1]); err != nil || d < time.Second || d > 1200*time.Millisecond {
		t.Errorf("the 429's Retry-After: 1 was waited %s, want 1s to 1.2s", m[1])
	}
	if n := strings.Count(s, "server received 1 attempt(s)\n"); n != 4 {
		t.Errorf("%d requests were not retried, want 4 (PATCH, 404, Retry-After cap, deadline):\n%s", n, s)
	}
}
