package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each path's 503 is retried by retryhttp, azcore's retries off: the
// upload (a PUT, safe to repeat) and the download succeed after two sends.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	if want := `uploaded after 2 sends, downloaded "quarterly numbers" after 2`; !strings.Contains(out.String(), want) {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}
