package retryhttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"reflect"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

func TestNestedTransportsOneOwner(t *testing.T) {
	for _, wrap := range []string{"direct", "middleware", "unwrap middleware", "cloning middleware", "otel-like middleware"} {
		t.Run(wrap, func(t *testing.T) {
			base := retrytest.NewScriptTransport(steps(503, 503, 503, 503, 503, 503, 503, 503, 503, 503)...)
			inner, _ := testTransport(base, WithMaxAttempts(3), WithBackoff(Constant(0)))
			var mid http.RoundTripper = inner
			switch wrap {
			case "middleware":
				mid = retrytest.RoundTripperFunc(inner.RoundTrip)
			case "unwrap middleware":
				mid = unwrapRT{inner}
			case "cloning middleware":
				mid = retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
					return inner.RoundTrip(r.Clone(r.Context()))
				})
			case "otel-like middleware":
				mid = otelLike{inner}
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

// Unwrap exposes the base, for middleware that looks through a chain; the
// zero Transport's base is the shared pooled transport.
func TestTransportUnwrap(t *testing.T) {
	base := retrytest.NewScriptTransport()
	if got := New(base).Unwrap(); got != base {
		t.Errorf("New(base).Unwrap() = %v, want base", got)
	}
	var zero Transport
	if _, ok := zero.Unwrap().(*http.Transport); !ok {
		t.Errorf("zero Transport's Unwrap() = %T, want *http.Transport", zero.Unwrap())
	}
}

// otelLike derives the request's context the way a tracing middleware
// does (a span value, a cancel, a client trace) and sends a clone.
type otelLike struct{ next http.RoundTripper }

type spanKey struct{}

func (m otelLike) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), spanKey{}, "span"))
	defer cancel() // the scripted base's bodies are in memory
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{})
	return m.next.RoundTrip(r.Clone(ctx))
}

// The mark is in the attempt's context only: the caller's request is not
// changed, nothing reaches the wire, and the context keeps the caller's
// values, deadline and cancellation.
func TestOwnerMarkInvisible(t *testing.T) {
	var gotHeader http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Clone()
	}))
	defer srv.Close()
	type userKey struct{}
	var seen *http.Request
	tr := New(retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		seen = r
		return http.DefaultTransport.RoundTrip(r)
	}))
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), userKey{}, "v"), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	req.Header.Set("X-Mine", "1")
	before, beforeHeader := *req, req.Header.Clone()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !reflect.DeepEqual(*req, before) || !reflect.DeepEqual(req.Header, beforeHeader) ||
		req.Context() != ctx || req.Context().Value(ownerKey{}) != nil {
		t.Error("the caller's request was changed")
	}
	if seen == req || seen.Context().Value(ownerKey{}) == nil {
		t.Error("the attempt sent to an opaque base is not marked")
	}
	sctx := seen.Context()
	if sctx.Value(userKey{}) != "v" || sctx.Done() != ctx.Done() {
		t.Error("the marked context lost the caller's value or cancellation")
	}
	want, _ := ctx.Deadline()
	if dl, ok := sctx.Deadline(); !ok || !dl.Equal(want) {
		t.Error("the marked context lost the caller's deadline")
	}
	for k := range gotHeader {
		switch k {
		case "X-Mine", "User-Agent", "Accept-Encoding":
		default:
			t.Errorf("header %s reached the server", k)
		}
	}
}

// Over an opaque base, the mark costs the one allocation of the attempt's
// request, its context with it.
func TestOwnerMarkOneAllocation(t *testing.T) {
	resp := withBody(respond(200), nopBody{}, 0)
	static := &staticTransport{resp}
	tr := New(retrytest.RoundTripperFunc(static.RoundTrip))
	if !tr.c.markOwner {
		t.Fatal("an opaque base is not marked")
	}
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	tr.RoundTrip(req)
	if a := testing.AllocsPerRun(100, func() { tr.RoundTrip(req) }); a != 1 {
		t.Errorf("a GET over an opaque base allocates %v times, want 1", a)
	}
}
