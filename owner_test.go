package retryhttp

import (
	"net/http"
	"testing"

	"github.com/retryhttp/retryhttp/retrytest"
)

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
