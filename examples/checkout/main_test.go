package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"net/http"

	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func fast() retryhttp.Option {
	return retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond))
}

// With keys injected, the lost answer is retried with the same key and the
// provider charges once; the checkout gets the first charge's id.
func TestCheckoutWithKeysChargesOnce(t *testing.T) {
	o := checkout("keys", &http.Client{Transport: retryhttp.New(nil, fast(), retryhttp.WithIdempotencyKeys())})
	if o.attempts != 2 || o.keys != 1 || o.charges != 1 {
		t.Errorf("provider saw %d attempts, %d keys, %d charges; want 2, 1, 1", o.attempts, o.keys, o.charges)
	}
	if want := `200 OK {"id":"ch_1","status":"succeeded"}`; o.result != want {
		t.Errorf("checkout got %q, want %q", o.result, want)
	}
}

// Without keys, a POST that reached the provider is never sent again: the
// checkout sees the failure and the customer is charged once.
func TestCheckoutWithoutKeysIsNotRetried(t *testing.T) {
	o := checkout("no keys", &http.Client{Transport: retryhttp.New(nil, fast())})
	if o.attempts != 1 || o.keys != 0 || o.charges != 1 {
		t.Errorf("provider saw %d attempts, %d keys, %d charges; want 1, 0, 1", o.attempts, o.keys, o.charges)
	}
	if !strings.HasPrefix(o.result, "error: ") {
		t.Errorf("checkout got %q, want the error", o.result)
	}
}

// The contrast the example prints: a loop that retries any error charges
// twice. If this stops failing, the provider no longer loses the answer
// and the other two tests prove nothing.
func TestNaiveLoopChargesTwice(t *testing.T) {
	o := checkout("naive", &http.Client{Transport: naive{http.DefaultTransport.(*http.Transport).Clone()}})
	if o.attempts != 2 || o.charges != 2 {
		t.Errorf("provider saw %d attempts, %d charges; want 2, 2", o.attempts, o.charges)
	}
}

func TestRunPrintsTheThreeSideBySide(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "retryhttp") || strings.HasPrefix(l, "naive") {
			rows = append(rows, strings.Join(strings.Fields(l), " "))
		}
	}
	want := []string{
		`retryhttp + WithIdempotencyKeys() 2 1 1 200 OK {"id":"ch_1","status":"succeeded"}`,
		`retryhttp, no keys 1 0 1 error: EOF`,
		`naive retry loop 2 0 2 200 OK {"id":"ch_2","status":"succeeded"}`,
	}
	if len(rows) != len(want) {
		t.Fatalf("rows:\n%s\nwant %d rows", out.String(), len(want))
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d = %q\nwant    %q", i, rows[i], want[i])
		}
	}
}
