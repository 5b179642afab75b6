package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The completion declared safe is retried by retryhttp after the 429's
// retry-after-ms, with the SDK's retries off.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	if want := `chat completion: "Hello!" after 2 attempts; waited at least retry-after-ms: true`; !strings.Contains(out.String(), want) {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}
