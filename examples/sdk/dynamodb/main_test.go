package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The reads are retried by retryhttp, with the SDK's retries off: a 503
// and a throttle (HTTP 400) each cost one more attempt; the conditional
// write is sent once and its error reaches the caller.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"GetItem (a read, 503 first): 2 attempts, item &{Ada",
		"Query (a read, throttled first): 2 attempts, 1 item(s)",
		"PutItem (a conditional write, 503 first): 1 attempt(s), error returned: true",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
