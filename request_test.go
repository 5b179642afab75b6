package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

func TestRequestOptions(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(context.Context) context.Context
		want int
	}{
		{"none", func(ctx context.Context) context.Context { return ctx }, 4},
		{"NoRetry", NoRetry, 1},
		{"two attempts", func(ctx context.Context) context.Context { return WithRequestOptions(ctx, WithMaxAttempts(2)) }, 2},
		{"later options win", func(ctx context.Context) context.Context {
			return WithRequestOptions(WithRequestOptions(ctx, WithMaxAttempts(2)), WithMaxAttempts(3))
		}, 3},
		{"no status retried", func(ctx context.Context) context.Context {
			return WithRequestOptions(ctx, WithRetryableStatuses())
		}, 1},
	}
	for _, tt := range tests {
		base := retrytest.NewScriptTransport(steps(503, 503, 503, 503)...)
		tr, _ := testTransport(base, WithBackoff(Constant(0)))
		req := newRequest(t, "GET", "http://h/", nil)
		resp, err := tr.RoundTrip(req.WithContext(tt.ctx(req.Context())))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if base.Count() != tt.want {
			t.Errorf("%s: %d attempts, want %d", tt.name, base.Count(), tt.want)
		}
	}
	// The Transport's own options are untouched by a request's.
	base := retrytest.NewScriptTransport(steps(503, 503, 503, 503)...)
	tr, _ := testTransport(base, WithBackoff(Constant(0)))
	resp, _ := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(NoRetry(context.Background())))
	resp.Body.Close()
	resp, _ = tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
	resp.Body.Close()
	if base.Count() != 1+4 {
		t.Errorf("%d attempts, want 1 then 4: a request's options leaked into the Transport", base.Count())
	}
}

func TestRequestOptionsRejected(t *testing.T) {
	// An option of the Transport's (WithMetrics, WithoutBudget) is not a
	// RequestOption: the compiler refuses it. Invalid values do not
	// panic on the request path: the request sends nothing and fails with
	// an *Error that names the option; one request, not the process.
	for _, tt := range []struct {
		opt  RequestOption
		want string
	}{
		{WithMaxAttempts(0), "WithMaxAttempts(0)"},
		{WithMaxElapsed(-time.Second), "WithMaxElapsed(-1s)"},
		{WithBackoff(BackoffFunc(nil)), "WithBackoff(retryhttp.BackoffFunc(nil))"},
	} {
		var sent atomic.Int64
		tr := New(retrytest.RoundTripperFunc(func(*http.Request) (*http.Response, error) {
			sent.Add(1)
			return respond(200), nil
		}))
		body := &closeCounter{Reader: strings.NewReader("x")}
		ctx := WithRequestOptions(context.Background(), WithMaxAttempts(2), tt.opt)
		req := newRequest(t, "PUT", "http://h/", nil).WithContext(ctx)
		req.Body = body
		resp, err := tr.RoundTrip(req)
		var re *Error
		switch {
		case resp != nil || !errors.As(err, &re) || re.Attempts != 0:
			t.Errorf("%s: RoundTrip = %v, %v; want an *Error with no attempt", tt.want, resp, err)
		case !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: error %q does not name the option", tt.want, err)
		case sent.Load() != 0 || body.closed.Load() != 1:
			t.Errorf("%s: %d attempts sent, body closed %d times; want none sent, the body closed once", tt.want, sent.Load(), body.closed.Load())
		}
		// The valid options of the same call are not lost for a later
		// context built on it: the error is.
		if _, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(WithRequestOptions(ctx))); err == nil {
			t.Errorf("%s: a context built on a bad one lost its error", tt.want)
		}
	}
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int64
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

// Typed nils (a nil pointer or func in an interface, which "== nil" does
// not see) are refused when the Transport is built, naming what was
// given; a nil *Transport used as a RoundTripper is the zero Transport.
func TestTypedNilsRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func()
		want string
	}{
		{"nil *http.Transport base", func() { New((*http.Transport)(nil)) }, "nil *http.Transport"},
		{"nil *Transport base", func() { New((*Transport)(nil)) }, "nil *retryhttp.Transport"},
		{"BackoffFunc(nil)", func() { New(nil, WithBackoff(BackoffFunc(nil))) }, "WithBackoff(retryhttp.BackoffFunc(nil))"},
		{"WithRetryableStatuses(200)", func() { New(nil, WithRetryableStatuses(503, 200)) }, "status code 200 is not an error status"},
		{"ProbeBackoff: BackoffFunc(nil)", func() {
			New(nil, WithRetryBreaker(BreakerConfig{ProbeBackoff: BackoffFunc(nil)}))
		}, "ProbeBackoff: retryhttp.BackoffFunc(nil)"},
	} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s: New panicked with %v; want an error naming %q", tt.name, err, tt.want)
				}
			}()
			tt.make()
		}()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	var nilTr *Transport
	resp, err := nilTr.RoundTrip(newRequest(t, "GET", srv.URL, nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a nil *Transport: %v, %v; want it to act as the zero Transport", resp, err)
	}
	resp.Body.Close()
}

// WithMaxElapsed: no wait starts that would end past the limit; the last
// response is returned at once, its body whole, reason max_elapsed.
func TestMaxElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(steps(503, 503, 503, 503, 503)...)
		m := NewMetrics()
		tr := New(base, WithMaxAttempts(10), WithoutBudget(), WithBackoff(Constant(time.Second)),
			WithMaxElapsed(2500*time.Millisecond), WithMetrics(m))
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if base.Count() != 3 || time.Since(start) != 2*time.Second || string(b) != "Service Unavailable" {
			t.Errorf("%d attempts in %v, body %q; want 3 in 2s, the 503's body whole", base.Count(), time.Since(start), b)
		}
		if got := testutilCounter(m, GiveUpMaxElapsed); got != 1 {
			t.Errorf("max_elapsed give-ups = %v, want 1", got)
		}
		// Per request, it gives up with an *Error that says why.
		base = retrytest.NewScriptTransport(fail(io.ErrUnexpectedEOF), fail(io.ErrUnexpectedEOF))
		tr = New(base, WithoutBudget(), WithBackoff(Constant(time.Second)))
		ctx := WithRequestOptions(context.Background(), WithMaxElapsed(500*time.Millisecond))
		_, err = tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
		var re *Error
		if !errors.As(err, &re) || re.Reason != GiveUpMaxElapsed || re.Attempts != 1 {
			t.Errorf("RoundTrip = %v; want an *Error after 1 attempt, reason max_elapsed", err)
		}
	})
}
