package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestMetricsExample(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, 30, false); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	// 30 requests; every third upstream answer is a 503, retried once with
	// success: 30 200s and 14 503s (answers 3, 6, ..., 42; the 44th is the
	// last 200).
	for _, want := range []string{
		`retryhttp_requests_total{criticality="default",method="GET",name="upstream"} 30`,
		`retryhttp_attempts_total{name="upstream",outcome="200"} 30`,
		`retryhttp_attempts_total{name="upstream",outcome="503"} 14`,
		`retryhttp_retries_total{criticality="default",name="upstream",outcome="503"} 14`,
		`retryhttp_backoff_seconds_count{name="upstream"} 14`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}
