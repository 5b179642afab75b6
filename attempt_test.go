package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retryhttp/retryhttp/retrytest"
)

// An attempt that hangs past the per-attempt timeout is retried, and the
// body of the response returned is still readable well past it.
func TestPerAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(retrytest.Step{Reply: retrytest.Reply{Fault: retrytest.Hang}},
			retrytest.Step{Reply: retrytest.Reply{Body: "after the hang"}})
		tr := New(base, WithBackoff(Constant(0)), WithoutBudget(), WithPerAttemptTimeout(50*time.Millisecond))
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
		tr := New(base, WithMaxAttempts(2), WithoutBudget(), WithBackoff(Constant(0)), WithPerAttemptTimeout(30*time.Millisecond))
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

// The attempt header follows the convention it is given, on every
// attempt: Envoy's count from 1, Stainless' retry count from 0, AWS's
// attempt and max.
func TestAttemptHeader(t *testing.T) {
	for _, tt := range []struct {
		name, value, want string
	}{
		{"X-Envoy-Attempt-Count", "{attempt}", "[1 2 3]"},
		{"X-Stainless-Retry-Count", "{retry}", "[0 1 2]"},
		{"amz-sdk-request", "attempt={attempt}; max={max}", "[attempt=1; max=4 attempt=2; max=4 attempt=3; max=4]"},
	} {
		base := retrytest.NewScriptTransport(steps(503, 503)...)
		tr, _ := testTransport(base, WithBackoff(Constant(0)), WithAttemptHeader(tt.name, tt.value))
		req := newRequest(t, "GET", "http://example.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var got []string
		for _, a := range base.Attempts() {
			got = append(got, a.Header.Get(tt.name))
		}
		if fmt.Sprint(got) != tt.want {
			t.Errorf("%s: %q, want %s", tt.name, got, tt.want)
		}
		if req.Header.Get(tt.name) != "" {
			t.Error("the caller's request got the attempt header")
		}
	}
	for _, bad := range [][2]string{{"bad header", "{attempt}"}, {"X-A", "{attempts}"}, {"X-A", "1"}, {"X-A", "{attempt}\r\nX-B: 1"}} {
		if p := catch(func() { New(nil, WithAttemptHeader(bad[0], bad[1])) }); p == nil {
			t.Errorf("WithAttemptHeader(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

// The deadline header carries, on each attempt, the milliseconds left of
// the smaller of the context's deadline and the per-attempt timeout,
// fresh each time.
func TestDeadlineHeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(steps(503, 503)...)
		tr, _ := testTransport(base, WithBackoff(Constant(time.Second)), WithDeadlineHeader("X-Envoy-Expected-Rq-Timeout-Ms"))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var got []string
		for _, a := range base.Attempts() {
			got = append(got, a.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"))
		}
		if fmt.Sprint(got) != "[5000 4000 3000]" {
			t.Errorf("deadline headers %q, want 5000, 4000, 3000: what is left at each attempt", got)
		}
		// A per-attempt timeout shorter than the deadline is the bound; with
		// neither, no header.
		base = retrytest.NewScriptTransport()
		tr, _ = testTransport(base, WithPerAttemptTimeout(250*time.Millisecond), WithDeadlineHeader("X-Timeout-Ms"))
		resp, _ = tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
		resp.Body.Close()
		base2 := retrytest.NewScriptTransport()
		tr2, _ := testTransport(base2, WithDeadlineHeader("X-Timeout-Ms"))
		resp, _ = tr2.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		resp.Body.Close()
		if a, b := base.Attempts()[0].Header.Get("X-Timeout-Ms"), base2.Attempts()[0].Header; a != "250" || b.Get("X-Timeout-Ms") != "" {
			t.Errorf("per-attempt bound %q, want 250; no bound %q, want none", a, b.Get("X-Timeout-Ms"))
		}
	})
}

// A base that returns a nil Body is tolerated, as http.Client tolerates
// it, with or without a per-attempt timeout.
func TestNilResponseBody(t *testing.T) {
	base := retrytest.RoundTripperFunc(func(*http.Request) (*http.Response, error) {
		return withBody(respond(200), nil, 0), nil
	})
	for _, d := range []time.Duration{0, time.Minute} {
		resp, err := New(base, WithPerAttemptTimeout(d)).RoundTrip(newRequest(t, "GET", "http://h/", nil))
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 0 || resp.Body.Close() != nil {
			t.Errorf("per-attempt timeout %v: body %q, %v", d, b, err)
		}
	}
}

// With one attempt, a failure worth retrying gives up for attempts, whatever
// the body, and a Backoff is given its own last value as prev, not the
// Retry-After that stretched the wait.
func TestReasonAndBackoffArgs(t *testing.T) {
	synctest.Test(t, testReasonAndBackoffArgs)
}

func testReasonAndBackoffArgs(t *testing.T) {
	var reasons []GiveUpReason
	m := NewMetrics()
	tr, _ := testTransport(retrytest.NewScriptTransport(steps(503)...), WithMaxAttempts(1), WithMetrics(m))
	resp, _ := tr.RoundTrip(newRequest(t, "PUT", "http://h/", struct{ io.Reader }{strings.NewReader("x")}))
	resp.Body.Close()
	for _, r := range giveUpReasons {
		if testutil.ToFloat64(m.giveups.WithLabelValues(defaultName, string(r), "default")) > 0 {
			reasons = append(reasons, r)
		}
	}
	if len(reasons) != 1 || reasons[0] != GiveUpAttempts {
		t.Errorf("WithMaxAttempts(1): give-ups %v, want [attempts]", reasons)
	}

	var prevs []time.Duration
	bo := BackoffFunc(func(n int, prev time.Duration) time.Duration {
		prevs = append(prevs, prev)
		return time.Duration(n) * time.Millisecond
	})
	ra := retrytest.Step{Reply: retrytest.RetryAfter(503, "2")}
	tr, _ = testTransport(retrytest.NewScriptTransport(ra, ra), WithBackoff(bo))
	prevs = nil // New sampled the schedule's length
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(prevs) != 2 || prevs[0] != 0 || prevs[1] != time.Millisecond {
		t.Errorf("Backoff was given prev %v, want [0 1ms]: its own values", prevs)
	}
}
