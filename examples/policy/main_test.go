package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/retrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each dependency gets its own policy: shipping-rates retries a 503 up to
// its 3 attempts in all; it does not retry a 500, which its policy lists
// as not retryable.
func TestPoliciesPerDependency(t *testing.T) {
	busy := retrytest.NewServer(retrytest.Status(503), retrytest.Status(503), retrytest.Status(503))
	defer busy.Close()
	broken := retrytest.NewServer(retrytest.Status(500))
	defer broken.Close()
	var out bytes.Buffer
	err := run(&out, "policies.json", []string{"shipping-rates=" + busy.URL, "shipping-rates=" + broken.URL})
	if err != nil {
		t.Fatal(err)
	}
	want := "dependencies: payments, shipping-rates\nshipping-rates: 503 Service Unavailable\nshipping-rates: 500 Internal Server Error\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	if busy.Count() != 3 || broken.Count() != 1 {
		t.Errorf("503 server saw %d attempts (want 3), 500 server %d (want 1)", busy.Count(), broken.Count())
	}
}

// A broken file is refused with the dependency and the field named.
func TestBrokenPolicy(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(file, []byte(`{"dependency": "rates", "retry": {"max_delay_ms": "soon"}}`), 0o644)
	err := run(&bytes.Buffer{}, file, nil)
	if err == nil || !strings.Contains(err.Error(), `policy "rates"`) || !strings.Contains(err.Error(), "max_delay_ms") {
		t.Errorf("run = %v, want an error naming the dependency and the field", err)
	}
}
