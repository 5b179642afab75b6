package retryhttp

import (
	"context"
	"errors"
	"io"
	"strings"
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
	// RequestOption: the compiler refuses it. Invalid values panic.
	for _, tt := range []struct {
		opt  RequestOption
		want string
	}{
		{WithMaxAttempts(0), "WithMaxAttempts(0)"},
		{WithMaxElapsed(-time.Second), "WithMaxElapsed(-1s)"},
	} {
		func() {
			defer func() {
				var msg string
				switch v := recover().(type) {
				case string:
					msg = v
				case error:
					msg = v.Error()
				}
				if !strings.Contains(msg, strings.TrimSuffix(tt.want, "(")) {
					t.Errorf("WithRequestOptions(%s): panic %q, want one naming it", tt.want, msg)
				}
			}()
			WithRequestOptions(context.Background(), tt.opt)
		}()
	}
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
