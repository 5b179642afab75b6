package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/retryhttp/retryhttp/retrytest"
)

// policyWithFallback is a Transport over base with a policy's fallback
// section and opts.
func policyWithFallback(t *testing.T, base http.RoundTripper, opts ...Option) *Transport {
	t.Helper()
	p, err := ParsePolicy([]byte(`{"dependency": "party", "criticality": "required-for-case-detail",
		"fallback": {"type": "partial_response", "user_message": "Party details temporarily unavailable"}}`))
	if err != nil {
		t.Fatal(err)
	}
	popts, err := p.Options()
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := testTransport(base, append(popts, opts...)...)
	return tr
}

// A request that gives up hands the caller its policy's fallback: with
// the final response (FallbackOf), or in the *Error; one that succeeds,
// or whose answer is final, carries none.
func TestPolicyFallbackReachesTheCaller(t *testing.T) {
	want := Fallback{Type: "partial_response", UserMessage: "Party details temporarily unavailable"}
	base := retrytest.NewScriptTransport(steps(503, 503, 503, 503)...)
	tr := policyWithFallback(t, base)
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if fb := FallbackOf(resp); resp.StatusCode != 503 || fb == nil || *fb != want {
		t.Errorf("a 503 given up on: status %d, FallbackOf %+v; want 503 and %+v", resp.StatusCode, fb, want)
	}

	base = retrytest.NewScriptTransport(steps(404)...)
	tr = policyWithFallback(t, base)
	resp, _ = tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
	resp.Body.Close()
	if fb := FallbackOf(resp); fb != nil {
		t.Errorf("a 404, the dependency's answer: FallbackOf %+v, want none", fb)
	}

	reset := retrytest.Step{Err: io.ErrUnexpectedEOF}
	tr = policyWithFallback(t, retrytest.NewScriptTransport(reset, reset), WithMaxAttempts(2))
	_, err = tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
	var e *Error
	if !errors.As(err, &e) || e.Fallback == nil || *e.Fallback != want {
		t.Errorf("a request that gave up without a response: %v; want an *Error carrying %+v", err, want)
	}

	// Ended by the caller's own deadline: the *Error carries it too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	slow := retrytest.NewScriptTransport(retrytest.Step{Reply: retrytest.Reply{Delay: time.Minute}})
	_, err = policyWithFallback(t, slow).RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
	if !errors.As(err, &e) || e.Fallback == nil || *e.Fallback != want {
		t.Errorf("a request its caller canceled: %v; want an *Error carrying %+v", err, want)
	}
}

// WithFallback's function is called once, for a request that gave up: its
// response is returned, marked and counted, and the original's body is
// closed; returning nothing keeps the outcome; a success never calls it.
func TestWithFallback(t *testing.T) {
	calls := 0
	m := NewMetrics()
	fn := func(req *http.Request, resp *http.Response, err error) (*http.Response, error) {
		calls++
		if req.URL.Path == "/keep" {
			return nil, nil
		}
		if resp == nil || resp.StatusCode != 503 || err != nil {
			t.Errorf("the function got %v, %v; want the final 503 and no error", resp, err)
		}
		if req.URL.Path == "/bare" {
			return &http.Response{StatusCode: 200}, nil // no header, body or request
		}
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("cached"))}, nil
	}
	base := retrytest.NewScriptTransport(steps(503, 503, 503, 503, 503, 503, 503, 503, 503)...)
	tr := policyWithFallback(t, base, WithFallback(fn), WithMaxAttempts(3), WithMetrics(m))
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/page", nil))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if calls != 1 || string(body) != "cached" || resp.Header.Get("Retryhttp-Fallback") != "attempts" || FallbackOf(resp) == nil {
		t.Errorf("calls %d, body %q, marked %q, FallbackOf %v; want 1 call, its response marked attempts, the policy's fallback on it",
			calls, body, resp.Header.Get("Retryhttp-Fallback"), FallbackOf(resp))
	}
	if n := base.OpenBodies(); n != 0 {
		t.Errorf("%d bodies left open: the 503 that the fallback replaced must be closed", n)
	}
	if n := testutil.ToFloat64(m.fallback.WithLabelValues(defaultName, "attempts")); n != 1 {
		t.Errorf("fallbacks_total{reason=attempts} = %v, want 1", n)
	}
	resp, _ = tr.RoundTrip(newRequest(t, "GET", "http://h/keep", nil))
	resp.Body.Close()
	if calls != 2 || resp.StatusCode != 503 || resp.Header.Get("Retryhttp-Fallback") != "" {
		t.Errorf("nil, nil from the function: status %d, marked %q; want the request's own 503", resp.StatusCode, resp.Header.Get("Retryhttp-Fallback"))
	}
	resp, _ = tr.RoundTrip(newRequest(t, "GET", "http://h/bare", nil))
	if calls != 3 || resp.Body == nil || resp.Request == nil || resp.Header.Get("Retryhttp-Fallback") != "attempts" {
		t.Fatalf("a bare response made: body %v, request %v, header %v; want a body, the request and the mark", resp.Body, resp.Request, resp.Header)
	}
	resp.Body.Close()
	resp, _ = tr.RoundTrip(newRequest(t, "GET", "http://h/ok", nil))
	resp.Body.Close()
	if calls != 3 || resp.StatusCode != 200 {
		t.Errorf("a success: status %d, %d calls; want 200 and no call", resp.StatusCode, calls)
	}
}

// A function's error alone is returned; a nil function is refused.
func TestWithFallbackError(t *testing.T) {
	mine := errors.New("served stale elsewhere")
	tr := policyWithFallback(t, retrytest.NewScriptTransport(retrytest.Step{Err: io.ErrUnexpectedEOF}), WithMaxAttempts(1),
		WithFallback(func(*http.Request, *http.Response, error) (*http.Response, error) { return nil, mine }))
	if _, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil)); err != mine {
		t.Errorf("got %v, want the function's own error", err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "WithFallback(nil)") {
			t.Errorf("WithFallback(nil): panic %v, want one naming it", r)
		}
	}()
	New(nil, WithFallback(nil))
}
