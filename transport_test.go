package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// testTransport returns a Transport over base that retries at once
// (Constant(0)) and has no budget, unless opts say otherwise, and the log
// of the waits of the retries it sends. A test that sets a longer backoff
// runs under testing/synctest, where the waits are virtual.
func testTransport(base http.RoundTripper, opts ...Option) (*Transport, *sleepLog) {
	sl := new(sleepLog)
	all := append([]Option{WithoutBudget(), WithBackoff(Constant(0)), retryHook(sl.add)}, opts...)
	return New(base, all...), sl
}

// sleepLog records the waits of the retries sent.
type sleepLog struct {
	mu     sync.Mutex
	sleeps []time.Duration
}

func (l *sleepLog) add(a AttemptStart) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sleeps = append(l.sleeps, a.Delay)
}

// retryHook is an attempt hook that calls f as each retry (not a hedge)
// starts.
func retryHook(f func(AttemptStart)) Option {
	return WithAttemptHook(func(ctx context.Context, a AttemptStart) (context.Context, func(AttemptEnd)) {
		if a.Attempt > 1 && !a.Hedge {
			f(a)
		}
		return ctx, nil
	})
}

func (l *sleepLog) Sleeps() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.sleeps...)
}

func newRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func steps(codes ...int) []retrytest.Step {
	s := make([]retrytest.Step, len(codes))
	for i, c := range codes {
		s[i] = retrytest.Step{Reply: retrytest.Status(c)}
	}
	return s
}

func TestCallerRequestUnmodified(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503, 503)...)
	tr, _ := testTransport(base, WithBackoff(Constant(0)), WithIdempotencyKeys(), WithPerAttemptTimeout(time.Minute))
	req := newRequest(t, "POST", "http://example.test/pay?x=1", strings.NewReader("amount=10"))
	req.Header.Set("Authorization", "Bearer s3cret")
	before := req.Header.Clone()
	ctx := req.Context()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(req.Header) != len(before) || req.Header.Get("Authorization") != "Bearer s3cret" || req.Header.Get(HeaderIdempotencyKey) != "" {
		t.Errorf("caller's header changed: %v, was %v", req.Header, before)
	}
	if req.Context() != ctx || req.URL.String() != "http://example.test/pay?x=1" || req.Method != "POST" {
		t.Errorf("caller's request changed")
	}
	if err := retrytest.CheckSameHeader(base.Attempts(), HeaderIdempotencyKey); err != nil {
		t.Error(err)
	}
}

func TestIdempotencyKeyInjection(t *testing.T) {
	t.Run("injected once per request, same on every attempt", func(t *testing.T) {
		base := retrytest.NewScriptTransport(steps(503, 503)...)
		tr, _ := testTransport(base, WithBackoff(Constant(0)), WithIdempotencyKeys())
		resp, err := tr.RoundTrip(newRequest(t, "POST", "http://example.test/", strings.NewReader("a")))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || base.Count() != 3 {
			t.Fatalf("status %d after %d attempts, want 200 after 3", resp.StatusCode, base.Count())
		}
		att := base.Attempts()
		if err := retrytest.CheckSameHeader(att, HeaderIdempotencyKey); err != nil {
			t.Fatal(err)
		}
		key := att[0].Header.Get(HeaderIdempotencyKey)
		if len(key) != 36 || strings.Count(key, "-") != 4 || strings.ContainsRune(key, '"') {
			t.Errorf("key %q is not an unquoted UUID", key)
		}
		// A second logical request gets a new key.
		resp, err = tr.RoundTrip(newRequest(t, "POST", "http://example.test/", strings.NewReader("a")))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if k2 := base.Attempts()[3].Header.Get(HeaderIdempotencyKey); k2 == key || k2 == "" {
			t.Errorf("second request's key %q, first was %q", k2, key)
		}
	})
	t.Run("caller's key kept", func(t *testing.T) {
		for _, h := range []string{HeaderIdempotencyKey, headerXIdempotencyKey} {
			base := retrytest.NewScriptTransport(steps(503)...)
			tr, _ := testTransport(base, WithBackoff(Constant(0)), WithIdempotencyKeys())
			req := newRequest(t, "POST", "http://example.test/", nil)
			req.Header.Set(h, "mine")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for i, a := range base.Attempts() {
				if a.Header.Get(h) != "mine" || (h == headerXIdempotencyKey && a.Header.Get(HeaderIdempotencyKey) != "") {
					t.Errorf("%s: attempt %d headers %v, want the caller's key only", h, i+1, a.Header)
				}
			}
		}
	})
	t.Run("only named methods", func(t *testing.T) {
		base := retrytest.NewScriptTransport(steps(503, 503)...)
		tr, _ := testTransport(base, WithBackoff(Constant(0)), WithIdempotencyKeys("PATCH"))
		resp, err := tr.RoundTrip(newRequest(t, "POST", "http://example.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if base.Count() != 1 || base.Attempts()[0].Header.Get(HeaderIdempotencyKey) != "" {
			t.Errorf("POST with keys for PATCH only: %d attempts, key %q; want 1, none",
				base.Count(), base.Attempts()[0].Header.Get(HeaderIdempotencyKey))
		}
	})
	t.Run("generator", func(t *testing.T) {
		base := retrytest.NewScriptTransport()
		tr, _ := testTransport(base, WithIdempotencyKeys(), WithKeyGenerator(func() string { return strconv.Quote(NewUUIDKey()) }))
		resp, err := tr.RoundTrip(newRequest(t, "POST", "http://example.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if k := base.Attempts()[0].Header.Get(HeaderIdempotencyKey); len(k) != 38 || k[0] != '"' || k[37] != '"' {
			t.Errorf("key %q, want a quoted UUID", k)
		}
	})
}

func TestExhaustedReturnsLastResponse(t *testing.T) {
	base := retrytest.NewScriptTransport(
		retrytest.Step{Reply: retrytest.Reply{Status: 503, Body: "first"}},
		retrytest.Step{Reply: retrytest.Reply{Status: 502, Body: "second"}},
		retrytest.Step{Reply: retrytest.Reply{Status: 503, Body: "last"}},
	)
	tr, _ := testTransport(base, WithMaxAttempts(3), WithBackoff(Constant(0)))
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.test/", nil))
	if err != nil {
		t.Fatalf("RoundTrip error %v, want the last response", err)
	}
	if base.OpenBodies() != 1 {
		t.Errorf("%d response bodies open, want only the returned one", base.OpenBodies())
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(b) != "last" {
		t.Errorf("got %d %q, want 503 %q", resp.StatusCode, b, "last")
	}
	if base.OpenBodies() != 0 {
		t.Errorf("%d response bodies open after close", base.OpenBodies())
	}
}

func TestBackoffDelaysAndRetryAfter(t *testing.T) {
	past := time.Date(1990, 1, 2, 3, 4, 5, 0, time.UTC).Format(http.TimeFormat)
	tests := []struct {
		name       string
		backoff    Backoff
		retryAfter string
		wantSleeps []time.Duration
		wantCount  int
	}{
		{"exponential", Exponential(500*time.Millisecond, 3*time.Second), "", []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, 4},
		{"retry-after longer", Constant(time.Second), "5", []time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second}, 4},
		{"backoff longer", Constant(7 * time.Second), "5", []time.Duration{7 * time.Second, 7 * time.Second, 7 * time.Second}, 4},
		{"date in the past", Constant(time.Second), past, []time.Duration{time.Second, time.Second, time.Second}, 4},
		{"malformed ignored", Constant(time.Second), "soon", []time.Duration{time.Second, time.Second, time.Second}, 4},
		{"beyond max: give up at once", Constant(time.Second), "31", nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var s []retrytest.Step
				for range 4 {
					r := retrytest.Status(503)
					if tt.retryAfter != "" {
						r.Header = http.Header{"Retry-After": {tt.retryAfter}}
					}
					s = append(s, retrytest.Step{Reply: r})
				}
				base := retrytest.NewScriptTransport(s...)
				tr, fc := testTransport(base, WithBackoff(tt.backoff))
				resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.test/", nil))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				// A server's wait is spread upward, by at most hintSpread.
				got := fc.Sleeps()
				ok := len(got) == len(tt.wantSleeps)
				for i := 0; ok && i < len(got); i++ {
					ok = got[i] >= tt.wantSleeps[i] && float64(got[i]) <= float64(tt.wantSleeps[i])*(1+hintSpread)
				}
				if !ok {
					t.Errorf("sleeps = %v, want %v (server waits up to %v%% more)", got, tt.wantSleeps, hintSpread*100)
				}
				if base.Count() != tt.wantCount || resp.StatusCode != 503 {
					t.Errorf("%d attempts, status %d; want %d, 503", base.Count(), resp.StatusCode, tt.wantCount)
				}
			})
		})
	}
}

func TestDeadlineStopsWaitsThatCannotFinish(t *testing.T) {
	synctest.Test(t, testDeadlineStopsWaits)
}

func testDeadlineStopsWaits(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503, 503, 503)...)
	tr, fc := testTransport(base, WithBackoff(Constant(2*time.Second)))
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(3*time.Second))
	defer cancel()
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.test/", nil).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The first wait ends at +2s, before the deadline; the second would
	// end at +4s, past it: two attempts, one sleep, and the last 503.
	if base.Count() != 2 || len(fc.Sleeps()) != 1 || resp.StatusCode != 503 {
		t.Errorf("%d attempts, sleeps %v, status %d; want 2, [2s], 503", base.Count(), fc.Sleeps(), resp.StatusCode)
	}
}

func TestCancelDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(steps(503, 503)...)
		tr := New(base, WithBackoff(Constant(time.Minute)), WithoutBudget())
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.test/", nil).WithContext(ctx))
		if resp != nil || !errors.Is(err, context.Canceled) || time.Since(start) != 20*time.Millisecond {
			t.Fatalf("RoundTrip = %v, %v after %v; want nil, context.Canceled after 20ms", resp, err, time.Since(start))
		}
		if base.OpenBodies() != 0 {
			t.Errorf("the last response's body was not closed")
		}
	})
}

func TestCallerCancelNotRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		n.Add(1)
		cancel()
		return nil, r.Context().Err()
	})
	tr, _ := testTransport(base, WithBackoff(Constant(0)))
	_, err := tr.RoundTrip(newRequest(t, "GET", "http://example.test/", nil).WithContext(ctx))
	if !errors.Is(err, context.Canceled) || n.Load() != 1 {
		t.Errorf("err %v after %d attempts; want context.Canceled after 1", err, n.Load())
	}
}

type unwrapRT struct{ rt http.RoundTripper }

func (u unwrapRT) RoundTrip(r *http.Request) (*http.Response, error) { return u.rt.RoundTrip(r) }
func (u unwrapRT) Unwrap() http.RoundTripper                         { return u.rt }

func TestInvalidOptionsPanicNamingOption(t *testing.T) {
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"attempts", func() { New(nil, WithMaxAttempts(0)) }, "WithMaxAttempts(0)"},
		{"negative attempts", func() { New(nil, WithMaxAttempts(-1)) }, "WithMaxAttempts(-1)"},
		{"nil backoff", func() { New(nil, WithBackoff(nil)) }, "WithBackoff"},
		{"status", func() { New(nil, WithRetryableStatuses(503, 42)) }, "WithRetryableStatuses"},
		{"timeout", func() { New(nil, WithPerAttemptTimeout(-time.Second)) }, "WithPerAttemptTimeout"},
		{"retry-after", func() { New(nil, WithMaxRetryAfter(-1)) }, "WithMaxRetryAfter"},
		{"body", func() { New(nil, WithBodyBufferLimit(-1)) }, "WithBodyBufferLimit"},
		{"keys", func() { New(nil, WithIdempotencyKeys("")) }, "WithIdempotencyKeys"},
		{"generator", func() { New(nil, WithKeyGenerator(nil)) }, "WithKeyGenerator"},
		{"attempt header", func() { New(nil, WithAttemptHeader("bad header", "{attempt}")) }, `WithAttemptHeader("bad header", "{attempt}")`},
		{"deadline header", func() { New(nil, WithDeadlineHeader("")) }, `WithDeadlineHeader("")`},
		{"max < base", func() { FullJitter(time.Second, time.Millisecond) }, "FullJitter"},
		{"negative base", func() { Exponential(-time.Second, time.Second) }, "Exponential"},
		{"negative constant", func() { Constant(-1) }, "Constant"},
		{"negative ratio", func() { NewBudget(-0.1, 10) }, "NewBudget"},
		{"NaN floor", func() { NewBudget(0.1, nanValue()) }, "minPerSecond"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg := fmt.Sprint(r)
				if r == nil || !strings.Contains(msg, tt.want) || !strings.HasPrefix(msg, "retryhttp: ") {
					t.Errorf("panic %q, want a retryhttp message naming %s", msg, tt.want)
				}
			}()
			tt.f()
		})
	}
}

func nanValue() float64 { z := 0.0; return z / z }

func TestZeroTransport(t *testing.T) {
	srv := retrytest.NewServer(retrytest.Status(503))
	defer srv.Close()
	var tr Transport
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(newRequest(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || srv.Count() != 2 {
		t.Errorf("zero Transport: %d after %d attempts, want 200 after 2", resp.StatusCode, srv.Count())
	}
}

func TestNotHTTPPassedThroughOnce(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503, 503)...)
	tr, _ := testTransport(base, WithBackoff(Constant(0)))
	resp, err := tr.RoundTrip(newRequest(t, "GET", "ftp://example.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if base.Count() != 1 {
		t.Errorf("ftp request: %d attempts, want 1", base.Count())
	}
}

type closeIdleCounter struct {
	http.RoundTripper
	n int
}

func (c *closeIdleCounter) CloseIdleConnections() { c.n++ }

func TestCloseIdleConnectionsForwarded(t *testing.T) {
	base := &closeIdleCounter{RoundTripper: retrytest.NewScriptTransport()}
	New(base).CloseIdleConnections()
	if base.n != 1 {
		t.Errorf("CloseIdleConnections reached the base %d times, want 1", base.n)
	}
}

// The tests below use a real loopback server.

func TestRealServerConnectionReuse(t *testing.T) {
	srv := retrytest.NewServer(retrytest.Status(503), retrytest.Status(503))
	defer srv.Close()
	tr, _ := testTransport(nil, WithBackoff(Constant(0)))
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(newRequest(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if srv.Count() != 3 || srv.NewConns() != 1 {
		t.Errorf("%d attempts on %d connections, want 3 on 1 (discarded bodies drained)", srv.Count(), srv.NewConns())
	}
}

func TestRealServerRefusedPOSTRetried(t *testing.T) {
	addr, err := retrytest.RefusedAddr()
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	inner := &http.Transport{}
	defer inner.CloseIdleConnections()
	base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		n.Add(1)
		return inner.RoundTrip(r)
	})
	tr, _ := testTransport(base, WithBackoff(Constant(0)))
	_, err = tr.RoundTrip(newRequest(t, "POST", "http://"+addr+"/", strings.NewReader("x")))
	if !errors.Is(err, syscall.ECONNREFUSED) || n.Load() != 4 {
		t.Errorf("bare POST to a refused port: %v after %d attempts; want ECONNREFUSED after 4", err, n.Load())
	}
}

func TestRealServerResetPOSTNotRetried(t *testing.T) {
	tests := []struct {
		fault       retrytest.Fault
		method, key string
		want        int // attempts the server receives
	}{
		// A reset before any response byte: the server may have acted.
		{retrytest.Reset, "POST", "", 1},
		{retrytest.Reset, "POST", "k", 4},
		{retrytest.Reset, "GET", "", 4},
		// A reset in the middle of the body comes after RoundTrip returned
		// the response: it is the caller's to see, never retried.
		{retrytest.ResetAfterHeaders, "POST", "", 1},
		{retrytest.ResetAfterHeaders, "GET", "", 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%s/%q", tt.fault, tt.method, tt.key), func(t *testing.T) {
			srv := retrytest.NewServer()
			srv.Then = retrytest.Reply{Body: "the whole body", Fault: tt.fault}
			defer srv.Close()
			tr, _ := testTransport(nil, WithBackoff(Constant(0)))
			defer tr.CloseIdleConnections()
			req := newRequest(t, tt.method, srv.URL, strings.NewReader("body"))
			if tt.key != "" {
				req.Header.Set(HeaderIdempotencyKey, tt.key)
			}
			resp, err := tr.RoundTrip(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				t.Errorf("no error from a connection reset")
			}
			if got := srv.Count(); got != tt.want {
				t.Errorf("server received %d attempts, want %d", got, tt.want)
			}
			if err := retrytest.CheckSameBody(srv.Attempts(), []byte("body")); err != nil {
				t.Error(err)
			}
		})
	}
}

var _ = httptest.NewServer

func dialRefused() error { return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED} }
