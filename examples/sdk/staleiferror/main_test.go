// Tests of the stale-on-error recipe against httpcache v0.12.0 itself:
// what the caller gets, what the origin saw (retryhttp's retries before
// the cache's stale copy), and the library's limits, pinned so that an
// upgrade that changes them fails here and docs/recipes.md is updated.
package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"go.uber.org/goleak"
)

// goleak also checks that the deadline get gives each request frees the
// connection of the 503 that httpcache leaves open.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var fast = retryhttp.WithBackoff(retryhttp.Constant(time.Millisecond))

func TestRun(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`down, the copy stale:               200 "EUR/USD 1.08" STALE; the origin saw 4; stale, Age: 1`,
		`down, 1 s on:                       503 "rates are down" BYPASS; the origin saw 1`,
		`down, the copy stale:               503 "rates are down" BYPASS; the origin saw 4`,
		`down, asked with stale-if-error=60: 503 "rates are down" BYPASS; the origin saw 1`,
		`down, the copy stale:               panic: runtime error: invalid memory address or nil pointer dereference`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output:\n%s\nwant %q", out.String(), want)
		}
	}
}

// What the caller gets in each outage, and the bodies left open below the
// cache (bodySpy sits between it and retryhttp).
func TestOutcomes(t *testing.T) {
	t.Parallel()
	spies := make(chan *bodySpy, len(outages))
	results := play(func() http.RoundTripper {
		s := &bodySpy{rt: retryhttp.New(nil, fast)}
		spies <- s
		return s
	})
	close(spies)
	open := int64(0)
	for s := range spies {
		open += s.open.Load()
	}
	t.Run("marked 503", func(t *testing.T) { staleCopyServedAfterRetries(t, results[0], open) })
	t.Run("plain 503", func(t *testing.T) { plain503PassesThrough(t, results[1]) })
	t.Run("dropped", func(t *testing.T) { droppedConnectionPanics(t, results[2]) })
}

// The copy is stored, then served fresh; once stale, with the origin
// answering 503 with stale-if-error=1, retryhttp makes its 4 attempts and
// gives up, and only then does the cache serve the copy, marked STALE.
// Past the 503's window, the 503 comes through (after one attempt: the
// host has failed 4 times in a row, and retryhttp's breaker holds its
// retries). Serving the stale copy, httpcache drops the 503 that retryhttp
// gave up with without closing its body: its connection is held until the
// request's context ends (open counts the bodies left open in all three
// outages: this one alone).
func staleCopyServedAfterRetries(t *testing.T, outs []outcome, open int64) {
	want := []outcome{
		{step: "up", status: 200, body: "EUR/USD 1.08", cache: "MISS", sends: 1},
		{step: "up, again", status: 200, body: "EUR/USD 1.08", cache: "HIT", age: "0", sends: 0},
		{step: "down, the copy stale", status: 200, body: "EUR/USD 1.08", cache: "STALE", age: "1", stale: true, sends: 4},
		{step: "down, 1 s on", status: 503, body: "rates are down", cache: "BYPASS", sends: 1},
	}
	if len(outs) != len(want) {
		t.Fatalf("got %d outcomes, want %d: %v", len(outs), len(want), outs)
	}
	for i := range want {
		if outs[i] != want[i] {
			t.Errorf("got  %v\nwant %v", outs[i], want[i])
		}
	}
	if open != 1 {
		t.Errorf("%d bodies left open, want 1: the 503 the stale copy replaced", open)
	}
}

// A 503 without stale-if-error of its own comes through, after
// retryhttp's 4 attempts: httpcache v0.12.0 reads the directive from the
// error response only, not from the stored copy (max-age=1,
// stale-if-error=60) nor from the request.
func plain503PassesThrough(t *testing.T, outs []outcome) {
	if len(outs) != 4 {
		t.Fatalf("got %d outcomes, want 4: %v", len(outs), outs)
	}
	if got := outs[2]; got.status != 503 || got.stale || got.cache != "BYPASS" || got.sends != 4 {
		t.Errorf("got %v, want the 503, BYPASS, after 4 sends", got)
	}
	if got := outs[3]; got.status != 503 || got.stale {
		t.Errorf("got %v, want the 503", got)
	}
}

// When the request ends in an error (here the origin drops every
// connection, and retryhttp gives up with its *Error), httpcache v0.12.0
// dereferences the missing response and panics in the caller's goroutine.
// v0.13.0 returns the error instead (upstream commit 1b1dd0f), and serves
// no stale copy either: if this fails after an upgrade, update
// docs/recipes.md.
func droppedConnectionPanics(t *testing.T, outs []outcome) {
	got := outs[len(outs)-1]
	re, ok := got.panicked.(runtime.Error)
	if !ok || !strings.Contains(re.Error(), "nil pointer dereference") {
		t.Fatalf("got %v, want a nil pointer panic", got)
	}
	if got.sends < 4 { // retryhttp's 4 attempts, and net/http's own resend on a reused connection
		t.Errorf("the origin saw %d sends, want retryhttp's 4 attempts at least", got.sends)
	}
}

// A response that the caller's WithFallback function makes goes up
// through the cache as the origin's would: without Cache-Control: no-store
// the cache stores it, in place of the origin's copy (asked only-if-cached,
// it serves it); with no-store it does not (504, nothing stored).
func TestFallbackUnderTheCache(t *testing.T) {
	t.Parallel()
	for cc, want := range map[string]outcome{
		"":         {step: "only-if-cached", status: 200, body: "today's rates are unavailable", cache: "HIT", age: "0"},
		"no-store": {step: "only-if-cached", status: 504, cache: "BYPASS"},
	} {
		o := &origin{outage: plain503}
		o.down.Store(true)
		srv := httptest.NewServer(o)
		o.url = srv.URL
		fallback := retryhttp.WithFallback(func(r *http.Request, _ *http.Response, _ error) (*http.Response, error) {
			h := http.Header{}
			if cc != "" {
				h.Set("Cache-Control", cc)
			}
			return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("today's rates are unavailable")), Request: r}, nil
		})
		client := newClient(retryhttp.New(nil, fast, fallback))
		if got := get(client, o, "down", ""); got.status != 200 || got.sends != 4 {
			t.Errorf("Cache-Control %q: got %v, want the fallback after 4 sends", cc, got)
		}
		if got := get(client, o, "only-if-cached", "only-if-cached"); got != want {
			t.Errorf("Cache-Control %q:\ngot  %v\nwant %v", cc, got, want)
		}
		srv.Close()
	}
}

// bodySpy, between the cache and retryhttp, counts the bodies of the
// responses it passes up that nobody closed.
type bodySpy struct {
	rt   http.RoundTripper
	open atomic.Int64
}

func (s *bodySpy) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(req)
	if resp != nil {
		s.open.Add(1)
		resp.Body = &spiedBody{ReadCloser: resp.Body, open: &s.open}
	}
	return resp, err
}

type spiedBody struct {
	io.ReadCloser
	open *atomic.Int64
	once sync.Once
}

func (b *spiedBody) Close() error {
	b.once.Do(func() { b.open.Add(-1) })
	return b.ReadCloser.Close()
}
