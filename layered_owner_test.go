package retryhttp

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// sdkRetry is a request that an SDK above says is its own second try.
func sdkRetry(t *testing.T, url string) *http.Request {
	req := newRequest(t, "GET", url, nil)
	req.Header.Set("Amz-Sdk-Request", "attempt=2; max=3")
	return req
}

// sends runs req through tr and returns the status it ends with.
func sends(t *testing.T, tr http.RoundTripper, req *http.Request) int {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A layer above's try (its header says so) is its own: retryhttp saves a
// transient failure inside it with one retry, never more, never holds it,
// and gives it back to the layer above without a warning.
func TestLayerAboveOwnsItsTries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(steps(503, 200)...)
		tr, _ := testTransport(base, WithBackoff(Constant(10*time.Millisecond)))
		if got := sends(t, tr, sdkRetry(t, "http://h/")); got != 200 || base.Count() != 2 {
			t.Errorf("a transient 503 inside the SDK's try: %d after %d sends, want 200 after 2", got, base.Count())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		base := retrytest.NewScriptTransport(steps(503, 503, 503, 503)...)
		tr, _ := testTransport(base, WithBackoff(Constant(10*time.Millisecond)),
			WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
		if got := sends(t, tr, sdkRetry(t, "http://h/")); got != 503 || base.Count() != 2 {
			t.Errorf("a host that keeps failing: %d after %d sends, want its 503 after 2", got, base.Count())
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "a layer above retries too") {
			t.Errorf("%d warnings, want the one that says a layer above retries:\n%s", n, logs.String())
		}
	})
}

// Once a layer above has retried a request to a host, it owns the
// schedule of every request to that host for a minute: a first try gets
// one retry, and none while the host is failing; a minute later, the
// whole schedule again.
func TestLayerAboveOwnsItsHostForAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport()
		tr, _ := testTransport(base, WithBackoff(Constant(10*time.Millisecond)))
		sends(t, tr, sdkRetry(t, "http://h/")) // answered 200
		base = retrytest.NewScriptTransport(steps(503, 503, 503, 503)...)
		tr.c.base = base
		if got := sends(t, tr, newRequest(t, "GET", "http://h/x", nil)); got != 503 || base.Count() != 2 {
			t.Errorf("a first try to the host, within the minute: %d after %d sends, want its 503 after 2", got, base.Count())
		}
		time.Sleep(61 * time.Second)
		base = retrytest.NewScriptTransport(steps(503, 503)...)
		tr.c.base = base
		if got := sends(t, tr, newRequest(t, "GET", "http://h/x", nil)); got != 200 || base.Count() != 3 {
			t.Errorf("a minute later: %d after %d sends, want 200 after 3", got, base.Count())
		}
	})
}

// A layer above's try is charged to the budget as the retry it is: the
// floor that its tries spent is not there for another request's retry.
func TestLayerAboveTriesAreCharged(t *testing.T) {
	run := func(repeats int) int {
		var n int
		synctest.Test(t, func(t *testing.T) {
			base := retrytest.NewScriptTransport()
			tr := New(base, WithBudget(NewBudget(0, 1)), WithBackoff(Constant(time.Millisecond)))
			for range repeats {
				sends(t, tr, sdkRetry(t, "http://h/")) // 200, each charged to the floor (3 a span)
			}
			base = retrytest.NewScriptTransport(steps(503, 503, 503)...)
			tr.c.base = base
			sends(t, tr, newRequest(t, "GET", "http://h/", nil))
			n = base.Count()
		})
		return n
	}
	alone, after := run(0), run(3)
	if alone != 4 || after != 1 {
		t.Errorf("a GET answered 503 three times sends %d times alone and %d after 3 tries of an SDK spent the floor; want 4 and 1", alone, after)
	}
}

// While the host is failing, a layer above's try gets no retry of
// retryhttp's: its failure goes back to the layer, whose schedule it is.
func TestLayerAboveTryWhileTheHostFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(steps(503, 503, 503, 503, 503, 503, 503, 503, 503, 200)...)
		tr, _ := testTransport(base, WithBackoff(Constant(10*time.Millisecond)))
		for range 4 {
			sends(t, tr, sdkRetry(t, "http://h/"))
			time.Sleep(20 * time.Millisecond)
		}
		n := base.Count()
		if got := sends(t, tr, sdkRetry(t, "http://h/")); got != 503 || base.Count() != n+1 {
			t.Errorf("after %d failures in a row: %d after %d more sends, want the 503 after 1", n, got, base.Count()-n)
		}
	})
}

// keyed is a POST that carries the caller's own Idempotency-Key.
func keyed(t *testing.T, url, key string) *http.Request {
	req := newRequest(t, "POST", url, nil)
	req.Header.Set(HeaderIdempotencyKey, key)
	return req
}

// A key seen again makes only that request's schedule the caller's: an
// application that re-submits a keyed POST after a failure (what the
// key is for) does not turn the host's retries off for everyone else.
// The re-submitted request itself is a retry of the layer above: one
// retry of retryhttp's at most, and an error that says why.
func TestKeySeenAgainOwnsOnlyItsRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := retrytest.NewScriptTransport(steps(503, 503, 503, 503)...)
		tr, _ := testTransport(base, WithBackoff(Constant(10*time.Millisecond)))
		sends(t, tr, keyed(t, "http://h/charges", "order-7")) // 503 four times: the host is failing
		base = retrytest.NewScriptTransport(steps(503, 503, 503, 503)...)
		tr.c.base = base
		if got := sends(t, tr, keyed(t, "http://h/charges", "order-7")); got != 503 || base.Count() != 1 {
			t.Errorf("the same key again, the host failing: %d after %d sends, want its 503 after 1", got, base.Count())
		}
		base = retrytest.NewScriptTransport(steps(503, 503)...)
		tr.c.base = base
		if got := sends(t, tr, newRequest(t, "GET", "http://h/x", nil)); got != 200 || base.Count() != 3 {
			t.Errorf("a plain GET to the host after it: %d after %d sends, want 200 after 3 (the defaults)", got, base.Count())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		tr, _ := testTransport(retrytest.NewScriptTransport(retrytest.Step{Err: io.ErrUnexpectedEOF}), WithBackoff(Constant(10*time.Millisecond)))
		sends(t, tr, keyed(t, "http://h/charges", "order-8"))
		tr.c.base = retrytest.NewScriptTransport(retrytest.Step{Err: io.ErrUnexpectedEOF}, retrytest.Step{Err: io.ErrUnexpectedEOF})
		_, err := tr.RoundTrip(keyed(t, "http://h/charges", "order-8"))
		if err == nil || !strings.Contains(err.Error(), "a layer above retries this request and owns its schedule") {
			t.Errorf("the layer above's retry gave up with %v; want an error that says the layer above owns its schedule", err)
		}
	})
}

// A retry-count header is a retry only if it holds an integer above 0.
func TestRetryCountHeaderParsed(t *testing.T) {
	for v, want := range map[string]bool{"1": true, " 2 ": true, "0": false, "00": false, "": false, "abc": false, "-1": false} {
		if got := retried([]string{v}); got != want {
			t.Errorf("retried(%q) = %v, want %v", v, got, want)
		}
	}
}
