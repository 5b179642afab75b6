package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// An attempt that hangs past the per-attempt timeout is retried, and the
// body of the response returned is still readable well past it.
func TestPerAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(retrytest.Step{Reply: retrytest.Reply{Fault: retrytest.Hang}},
			retrytest.Step{Reply: retrytest.Reply{Body: "after the hang"}})
		tr := New(base, WithBackoff(Constant(0)), WithBudget(nil), WithPerAttemptTimeout(50*time.Millisecond))
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) != 50*time.Millisecond {
			t.Errorf("answered after %v, want the 50ms of the hung attempt", time.Since(start))
		}
		time.Sleep(150 * time.Millisecond)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "after the hang" || base.Count() != 2 {
			t.Errorf("body %q, %v after %d attempts; want %q after 2", b, err, base.Count(), "after the hang")
		}
	})
}

func TestPerAttemptTimeoutEveryAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := retrytest.Step{Reply: retrytest.Reply{Fault: retrytest.Hang}}
		base := retrytest.NewScriptTransport(hang, hang)
		tr := New(base, WithMaxAttempts(2), WithBudget(nil), WithBackoff(Constant(0)), WithPerAttemptTimeout(30*time.Millisecond))
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		var ne net.Error
		if resp != nil || !errors.Is(err, ErrAttemptTimeout) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("RoundTrip = %v, %v; want an attempt timeout", resp, err)
		}
		if errors.Is(err, context.Canceled) {
			t.Errorf("an attempt timeout must not look like the caller's cancellation: %v", err)
		}
		if base.Count() != 2 {
			t.Errorf("%d attempts, want 2", base.Count())
		}
	})
}

func TestSlowBodyOfReturnedResponseNotCut(t *testing.T) {
	srv := retrytest.NewServer(retrytest.Reply{Body: "slowly", Fault: retrytest.SlowBody(15 * time.Millisecond)})
	defer srv.Close()
	tr, _ := testTransport(nil, WithPerAttemptTimeout(30*time.Millisecond))
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(newRequest(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body) // takes ~90ms, three times the per-attempt timeout
	resp.Body.Close()
	if err != nil || string(b) != "slowly" {
		t.Errorf("body %q, %v; want %q", b, err, "slowly")
	}
}

func TestAttemptHeader(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503, 503)...)
	tr, _ := testTransport(base, WithBackoff(Constant(0)), WithAttemptHeader("x-retry-attempt"))
	req := newRequest(t, "GET", "http://example.test/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var got []string
	for _, a := range base.Attempts() {
		got = append(got, a.Header.Get("X-Retry-Attempt"))
	}
	if fmt.Sprint(got) != "[ 2 3]" {
		t.Errorf("attempt headers %q, want none on the first attempt, then 2, 3", got)
	}
	if req.Header.Get("X-Retry-Attempt") != "" {
		t.Error("the caller's request got the attempt header")
	}
}
