package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The message declared safe is retried by retryhttp once the requests
// limit resets, as the 429's anthropic-ratelimit-requests-reset says,
// with the SDK's retries off.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	if want := `message: "Hello!" after 2 attempts; the retry waited for the limit's reset: true`; !strings.Contains(out.String(), want) {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}
