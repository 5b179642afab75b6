package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The search, declared safe by the policy, is retried; the write is sent
// once, and its 503 reaches the caller.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"search (declared safe, 503 first): status 200 after 2 attempts",
		"index (a write, 503 first): status 503 after 1 attempt(s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
