package retryhttp

import (
	"strings"
	"testing"

	"github.com/retryhttp/retryhttp/retrytest"
)

func TestMethodDecisions(t *testing.T) {
	for _, tc := range []decisionCase{
		{name: "GET", method: "GET", step: answer(503), want: 3},
		{name: "empty method", method: "", step: answer(503), want: 3},
		{name: "HEAD", method: "HEAD", step: answer(503), want: 3},
		{name: "OPTIONS", method: "OPTIONS", step: answer(503), want: 3},
		{name: "TRACE", method: "TRACE", step: answer(503), want: 3},
		{name: "PUT", method: "PUT", step: answer(503), want: 3},
		{name: "DELETE", method: "DELETE", step: answer(503), want: 3},
		{name: "POST", method: "POST", step: answer(503), want: 1},
		{name: "PATCH", method: "PATCH", step: answer(503), want: 1},
		{name: "CONNECT", method: "CONNECT", step: answer(503), want: 1},
		{name: "LOCK", method: "LOCK", step: answer(503), want: 1},
		{name: "POST with a key", method: "POST", header: "Idempotency-Key", step: answer(503), want: 3},
		{name: "PATCH with an X- key", method: "PATCH", header: "X-Idempotency-Key", step: answer(503), want: 3},
		// 409 Conflict: "still processing" for a keyed request, a real conflict otherwise.
		{name: "keyed POST 409", method: "POST", header: "Idempotency-Key", step: answer(409), want: 3},
		{name: "PUT 409", method: "PUT", step: answer(409), want: 1},
		{name: "GET 409", method: "GET", step: answer(409), want: 1},
	} {
		runDecision(t, tc)
	}
}

// A key the caller set under a non-canonical header name (a map
// assignment) is seen: the request is sent with it alone, never with an
// injected second key, and it is retried as keyed.
func TestNonCanonicalKeyNotDoubled(t *testing.T) {
	base := retrytest.NewScriptTransport(steps(503)...)
	tr, _ := testTransport(base, WithIdempotencyKeys(), WithBackoff(Constant(0)))
	req := newRequest(t, "POST", "http://h/", nil)
	lower := strings.ToLower(HeaderIdempotencyKey) // as a map assignment would spell it
	req.Header[lower] = []string{"mine"}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if base.Count() != 2 {
		t.Fatalf("%d attempts, want 2: the keyed POST is retried", base.Count())
	}
	for i, a := range base.Attempts() {
		if n := len(a.Header.Values(HeaderIdempotencyKey)); n != 0 || a.Header[lower][0] != "mine" {
			t.Errorf("attempt %d: %d injected keys and %q, want only the caller's", i+1, n, a.Header[lower])
		}
	}
}
