package retryhttp

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// testTransport returns a Transport over base that never really sleeps and
// has no budget, unless opts say otherwise.
func testTransport(base http.RoundTripper, opts ...Option) (*Transport, *fakeClock) {
	fc := newFakeClock()
	all := append([]Option{withClock(fc), WithBudget(nil)}, opts...)
	return New(base, all...), fc
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

func TestStatusDecisions(t *testing.T) {
	tests := []struct {
		status int
		retry  bool
	}{
		{200, false}, {201, false}, {204, false}, {301, false}, {304, false},
		{400, false}, {401, false}, {403, false}, {404, false}, {409, false}, {422, false},
		{408, true}, {429, true},
		{500, true}, {502, true}, {503, true}, {504, true}, {507, true}, {509, true}, {599, true},
		{501, false}, {505, false}, {506, false}, {508, false}, {510, false}, {511, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			base := retrytest.NewScriptTransport(steps(tt.status, tt.status, tt.status)...)
			tr, _ := testTransport(base, WithMaxAttempts(3), WithBackoff(Constant(0)))
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.test/", nil))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			resp.Body.Close()
			want := 1
			if tt.retry {
				want = 3
			}
			if got := base.Count(); got != want {
				t.Errorf("GET answered %d: %d attempts, want %d", tt.status, got, want)
			}
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.status)
			}
		})
	}
}

func TestMethodDecisions(t *testing.T) {
	tests := []struct {
		method string
		header string // idempotency header set by the caller, if any
		status int
		want   int // attempts
	}{
		{"GET", "", 503, 3}, {"", "", 503, 3}, {"HEAD", "", 503, 3}, {"OPTIONS", "", 503, 3},
		{"TRACE", "", 503, 3}, {"PUT", "", 503, 3}, {"DELETE", "", 503, 3},
		{"POST", "", 503, 1}, {"PATCH", "", 503, 1}, {"CONNECT", "", 503, 1}, {"LOCK", "", 503, 1},
		{"POST", "Idempotency-Key", 503, 3}, {"PATCH", "X-Idempotency-Key", 503, 3},
		// 409 Conflict: "still processing" for a keyed request, a real conflict otherwise.
		{"POST", "Idempotency-Key", 409, 3}, {"PUT", "", 409, 1}, {"GET", "", 409, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%d", tt.method, tt.header, tt.status), func(t *testing.T) {
			base := retrytest.NewScriptTransport(steps(tt.status, tt.status, tt.status)...)
			tr, _ := testTransport(base, WithMaxAttempts(3), WithBackoff(Constant(0)))
			req := newRequest(t, tt.method, "http://example.test/", nil)
			if tt.header != "" {
				req.Header.Set(tt.header, "k-1")
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			resp.Body.Close()
			if got := base.Count(); got != tt.want {
				t.Errorf("%q with %q answered %d: %d attempts, want %d", tt.method, tt.header, tt.status, got, tt.want)
			}
		})
	}
}

func TestErrorDecisions(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name   string
		method string
		err    error
		want   int
		reason GiveUpReason // of the *Error, "" if not retryable
	}{
		{"GET reset", "GET", reset, 3, GiveUpAttempts},
		{"GET unexpected EOF", "GET", io.ErrUnexpectedEOF, 3, GiveUpAttempts},
		{"GET EOF", "GET", io.EOF, 3, GiveUpAttempts},
		{"GET refused", "GET", refused, 3, GiveUpAttempts},
		{"POST reset", "POST", reset, 1, GiveUpUnsafeMethod},
		{"POST EOF", "POST", io.EOF, 1, GiveUpUnsafeMethod},
		{"POST refused (nothing sent)", "POST", refused, 3, GiveUpAttempts},
		{"GET unknown authority", "GET", &wrappedTLSError{x509.UnknownAuthorityError{}}, 1, ""},
		{"GET hostname mismatch", "GET", x509.HostnameError{Host: "x"}, 1, ""},
		{"GET no such host", "GET", &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, 1, ""},
		{"GET temporary DNS failure", "GET", &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}, 3, GiveUpAttempts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := retrytest.NewScriptTransport(
				retrytest.Step{Err: tt.err}, retrytest.Step{Err: tt.err}, retrytest.Step{Err: tt.err})
			tr, _ := testTransport(base, WithMaxAttempts(3), WithBackoff(Constant(0)))
			resp, err := tr.RoundTrip(newRequest(t, tt.method, "http://example.test/", nil))
			if resp != nil {
				t.Fatalf("RoundTrip returned a response and %v", err)
			}
			if got := base.Count(); got != tt.want {
				t.Errorf("attempts = %d, want %d", got, tt.want)
			}
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *retryhttp.Error", err)
			}
			if re.Attempts != tt.want || re.Reason != tt.reason {
				t.Errorf("Error{Attempts: %d, Reason: %q}, want {%d, %q}", re.Attempts, re.Reason, tt.want, tt.reason)
			}
			if !errors.Is(err, tt.err) && !errors.Is(err, errors.Unwrap(tt.err)) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%d attempt", tt.want)) {
				t.Errorf("error %q does not say how many attempts were made", err)
			}
		})
	}
}

// wrappedTLSError wraps an error the way net/http wraps a TLS failure.
type wrappedTLSError struct{ err error }

func (e *wrappedTLSError) Error() string { return "tls: " + e.err.Error() }
func (e *wrappedTLSError) Unwrap() error { return e.err }

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
		for _, h := range []string{HeaderIdempotencyKey, HeaderXIdempotencyKey} {
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
				if a.Header.Get(h) != "mine" || (h == HeaderXIdempotencyKey && a.Header.Get(HeaderIdempotencyKey) != "") {
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
		tr, _ := testTransport(base, WithIdempotencyKeys(), WithKeyGenerator(NewQuotedUUIDKey))
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
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	past := now.Add(-time.Hour).Format(http.TimeFormat)
	tests := []struct {
		name       string
		backoff    Backoff
		retryAfter string
		wantSleeps []time.Duration
		wantCount  int
	}{
		{"exponential", Exponential(time.Second, 3*time.Second), "", []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, 4},
		{"retry-after longer", Constant(time.Second), "5", []time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second}, 4},
		{"backoff longer", Constant(7 * time.Second), "5", []time.Duration{7 * time.Second, 7 * time.Second, 7 * time.Second}, 4},
		{"date in the past", Constant(time.Second), past, []time.Duration{time.Second, time.Second, time.Second}, 4},
		{"malformed ignored", Constant(time.Second), "soon", []time.Duration{time.Second, time.Second, time.Second}, 4},
		{"beyond max: give up at once", Constant(time.Second), "31", nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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
			if got := fc.Sleeps(); fmt.Sprint(got) != fmt.Sprint(tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleeps)
			}
			if base.Count() != tt.wantCount || resp.StatusCode != 503 {
				t.Errorf("%d attempts, status %d; want %d, 503", base.Count(), resp.StatusCode, tt.wantCount)
			}
		})
	}
}

func TestDeadlineStopsWaitsThatCannotFinish(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503, 503, 503)...)
	tr, fc := testTransport(base, WithBackoff(Constant(2*time.Second)))
	ctx, cancel := context.WithDeadline(context.Background(), fc.Now().Add(3*time.Second))
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
		tr := New(base, WithBackoff(Constant(time.Minute)), WithBudget(nil))
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

func TestNestedTransportsOneOwner(t *testing.T) {
	for _, wrap := range []string{"direct", "middleware", "unwrap middleware"} {
		t.Run(wrap, func(t *testing.T) {
			base := retrytest.NewScriptTransport(steps(503, 503, 503, 503, 503, 503, 503, 503, 503, 503)...)
			inner, _ := testTransport(base, WithMaxAttempts(3), WithBackoff(Constant(0)))
			var mid http.RoundTripper = inner
			switch wrap {
			case "middleware":
				mid = retrytest.RoundTripperFunc(inner.RoundTrip)
			case "unwrap middleware":
				mid = unwrapRT{inner}
			}
			outer, _ := testTransport(mid, WithMaxAttempts(3), WithBackoff(Constant(0)))
			resp, err := outer.RoundTrip(newRequest(t, "GET", "http://example.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if base.Count() != 3 {
				t.Errorf("%d attempts reached the server, want 3 (one retry owner, not 3×3)", base.Count())
			}
		})
	}
}

type unwrapRT struct{ rt http.RoundTripper }

func (u unwrapRT) RoundTrip(r *http.Request) (*http.Response, error) { return u.rt.RoundTrip(r) }
func (u unwrapRT) Unwrap() http.RoundTripper                         { return u.rt }

func TestFindInner(t *testing.T) {
	inner := New(nil)
	tests := []struct {
		name      string
		base      http.RoundTripper
		wantInner bool
		wantMark  bool
	}{
		{"http.Transport", &http.Transport{}, false, false},
		{"Transport", inner, true, false},
		{"unwrap to http.Transport", unwrapRT{&http.Transport{}}, false, false},
		{"unwrap to Transport", unwrapRT{inner}, false, true},
		{"opaque", retrytest.RoundTripperFunc(nil), false, true},
	}
	for _, tt := range tests {
		gotInner, gotMark := findInner(tt.base)
		if (gotInner != nil) != tt.wantInner || gotMark != tt.wantMark {
			t.Errorf("findInner(%s) = %v, %v; want inner %v, mark %v", tt.name, gotInner != nil, gotMark, tt.wantInner, tt.wantMark)
		}
	}
}

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
		{"attempt header", func() { New(nil, WithAttemptHeader("bad header")) }, `WithAttemptHeader("bad header")`},
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

func TestOnRetryHook(t *testing.T) {
	base := retrytest.NewScriptTransport(
		retrytest.Step{Reply: retrytest.Status(503)},
		retrytest.Step{Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}})
	var events []RetryEvent
	tr, _ := testTransport(base, WithBackoff(Constant(time.Second)), WithOnRetry(func(ev RetryEvent) { events = append(events, ev) }))
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(events) != 2 {
		t.Fatalf("%d events, want 2", len(events))
	}
	e0, e1 := events[0], events[1]
	if e0.Attempt != 1 || e0.StatusCode != 503 || e0.Outcome != "503" || e0.Delay != time.Second || e0.MaxAttempts != 4 || e0.Err != nil {
		t.Errorf("event 1 = %+v", e0)
	}
	if e1.Attempt != 2 || e1.StatusCode != 0 || e1.Outcome != "reset" || e1.Err == nil {
		t.Errorf("event 2 = %+v", e1)
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

var _ = httptest.NewServer

func dialRefused() error { return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED} }

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
