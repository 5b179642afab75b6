package retryhttp

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

func TestRateLimitWait(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{"retry-after-ms", h("retry-after-ms", "1500"), 1500 * time.Millisecond, true},
		{"retry-after-ms before Retry-After", h("retry-after-ms", "20", "Retry-After", "5"), 20 * time.Millisecond, true},
		{"Retry-After", h("Retry-After", "3"), 3 * time.Second, true},
		{"IETF RateLimit, none left", h("RateLimit", `"default";r=0;t=7`), 7 * time.Second, true},
		{"IETF RateLimit, some left", h("RateLimit", `"default";r=5;t=7`), 0, false},
		{"IETF RateLimit, two policies", h("RateLimit", `"a";r=3;t=1, "b";r=0;t=9`), 9 * time.Second, true},
		{"RateLimit, older form", h("RateLimit", "limit=10, remaining=0, reset=4"), 4 * time.Second, true},
		{"RateLimit-Reset with none left", h("RateLimit-Remaining", "0", "RateLimit-Reset", "6"), 6 * time.Second, true},
		{"RateLimit-Reset with some left", h("RateLimit-Remaining", "2", "RateLimit-Reset", "6"), 0, false},
		{"X-RateLimit-Reset, Unix time", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(now.Unix()+42, 10)), 42 * time.Second, true},
		{"X-RateLimit-Reset, seconds", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "8"), 8 * time.Second, true},
		{"X-RateLimit-Reset, past", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(now.Unix()-5, 10)), 0, true},
		{"OpenAI requests", h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6m0s"), 6 * time.Minute, true},
		{"OpenAI, the longer", h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "20ms",
			"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "1.5s"), 1500 * time.Millisecond, true},
		{"OpenAI, some left", h("X-Ratelimit-Remaining-Tokens", "10", "X-Ratelimit-Reset-Tokens", "1s"), 0, false},
		{"malformed ignored", h("retry-after-ms", "soon", "Retry-After", "-1", "RateLimit", "r=x;t=y"), 0, false},
		{"x-amz-retry-after", h("x-amz-retry-after", "2500"), 2500 * time.Millisecond, true},
		{"Azure's x-ms-retry-after-ms", h("x-ms-retry-after-ms", "1500"), 1500 * time.Millisecond, true},
		{"x-ms-retry-after-ms before Retry-After", h("x-ms-retry-after-ms", "1500", "Retry-After", "9"), 1500 * time.Millisecond, true},
		{"retry-after-ms in exponent notation", h("retry-after-ms", "1.5e3"), 1500 * time.Millisecond, true},
		{"retry-after-ms too large, in exponent notation", h("retry-after-ms", "1e15"), maxHint, true},
		{"x-amz-retry-after, a signed exponent", h("x-amz-retry-after", "25E+2"), 2500 * time.Millisecond, true},
		{"retry-after-ms, a bare exponent: malformed", h("retry-after-ms", "e3"), 0, false},
		{"retry-after-ms, a sign: malformed", h("retry-after-ms", "-1e3"), 0, false},
		{"RateLimit-Reset, Unix time (GitLab)", h("RateLimit-Remaining", "0", "RateLimit-Reset", strconv.FormatInt(now.Unix()+42, 10)), 42 * time.Second, true},
		{"RateLimit on two lines", http.Header{"Ratelimit": {`"a";r=3;t=1`, `"b";r=0;t=9`}}, 9 * time.Second, true},
		{"Anthropic reset, requests", h("anthropic-ratelimit-requests-remaining", "0",
			"anthropic-ratelimit-requests-reset", now.Add(3*time.Second).UTC().Format(time.RFC3339)), 3 * time.Second, true},
		{"Anthropic reset, remaining not given", h("anthropic-ratelimit-tokens-reset", now.Add(5*time.Second).UTC().Format(time.RFC3339)), 5 * time.Second, true},
		{"Anthropic reset, the latest exhausted", h("anthropic-ratelimit-requests-remaining", "10",
			"anthropic-ratelimit-requests-reset", now.Add(50*time.Second).UTC().Format(time.RFC3339),
			"anthropic-ratelimit-input-tokens-remaining", "0",
			"anthropic-ratelimit-input-tokens-reset", now.Add(4*time.Second).UTC().Format(time.RFC3339)), 4 * time.Second, true},
		// Too large to represent: the longest wait, never no hint.
		{"retry-after-ms, 10^12", h("retry-after-ms", "1000000000000"), 1e12 * time.Millisecond, true},
		{"retry-after-ms, beyond float64", h("retry-after-ms", "1"+strings.Repeat("0", 400)), maxHint, true},
		{"X-RateLimit-Reset, 10^20", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "100000000000000000000"), maxHint, true},
		{"RateLimit t, 10^20", h("RateLimit", `"d";r=0;t=100000000000000000000`), maxHint, true},
		{"OpenAI, 9999999h", h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "9999999h"), maxHint, true},
		{"OpenAI, malformed", h("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "9999999 hours"), 0, false},
		// Milliseconds are digits, with a fraction at most: not Go's float syntax.
		{"retry-after-ms, inf", h("retry-after-ms", "inf"), 0, false},
		{"retry-after-ms, sign", h("retry-after-ms", "+100"), 0, false},
		{"retry-after-ms, hex", h("retry-after-ms", "0x10"), 0, false},
		{"retry-after-ms, underscores", h("retry-after-ms", "1_000"), 0, false},
		{"retry-after-ms, fraction", h("retry-after-ms", "1.5"), 1500 * time.Microsecond, true},
		// A Unix time long past (a stale cache, a skewed clock) is no wait.
		{"X-RateLimit-Reset, a Unix time a year ago", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(now.Unix()-365*86400, 10)), 0, true},
		// The older form on two lines: each line read alone.
		{"RateLimit, older form, two lines", http.Header{"Ratelimit": {"remaining=0, reset=4", "remaining=5, reset=60"}}, 4 * time.Second, true},
		{"RateLimit, older form, split over lines", http.Header{"Ratelimit": {"limit=10, remaining=0", "reset=5"}}, 5 * time.Second, true},
		{"none", h(), 0, false},
	}
	for _, tt := range tests {
		got, ok := rateLimitWait(tt.h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// x-should-retry: false makes an answer final; true makes it worth
// retrying, within the method gate. A 403 with X-RateLimit-Remaining: 0
// is a throttle; a plain 403 is final.
func TestShouldRetryAndThrottles(t *testing.T) {
	for _, tt := range []struct {
		name   string
		method string
		reply  retrytest.Reply
		want   int
	}{
		{"503, x-should-retry: false", "GET", retrytest.Reply{Status: 503, Header: http.Header{"X-Should-Retry": {"false"}}}, 1},
		{"400, x-should-retry: true", "GET", retrytest.Reply{Status: 400, Header: http.Header{"X-Should-Retry": {"true"}}}, 2},
		{"400, x-should-retry: true, bare POST", "POST", retrytest.Reply{Status: 400, Header: http.Header{"X-Should-Retry": {"true"}}}, 1},
		{"403 throttle", "GET", retrytest.Reply{Status: 403, Header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1"}}}, 2},
		{"plain 403", "GET", retrytest.Reply{Status: 403}, 1},
		// GitHub's secondary rate limit: 403, Retry-After, requests left.
		{"403 secondary limit", "GET", retrytest.Reply{Status: 403, Header: http.Header{"Retry-After": {"1"}, "X-Ratelimit-Remaining": {"4999"}}}, 2},
	} {
		base := retrytest.NewScriptTransport(retrytest.Step{Reply: tt.reply})
		tr, _ := testTransport(base)
		synctest.Test(t, func(t *testing.T) {
			resp, err := tr.RoundTrip(newRequest(t, tt.method, "http://h/", nil))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
		if base.Count() != tt.want {
			t.Errorf("%s: %d attempts, want %d", tt.name, base.Count(), tt.want)
		}
	}
}

// 40 clients told Retry-After: 1 at once come back over [1s, 1.2s], not
// in the same instant, and none before 1s.
func TestHintSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var at []time.Duration
		start := time.Now()
		seen := map[string]int{}
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			id := r.Header.Get("X-Id")
			seen[id]++
			if seen[id] == 1 {
				return &http.Response{StatusCode: 429, Body: http.NoBody, Header: http.Header{"Retry-After": {"1"}}}, nil
			}
			at = append(at, time.Since(start))
			return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
		})
		var wg sync.WaitGroup
		for i := range 40 {
			tr := New(base, WithBackoff(Constant(0))) // one client each
			wg.Go(func() {
				req := newRequest(t, "GET", "http://h/", nil).WithContext(context.Background())
				req.Header.Set("X-Id", strconv.Itoa(i))
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		distinct := map[time.Duration]bool{}
		for _, d := range at {
			if d < time.Second || d > 1200*time.Millisecond {
				t.Errorf("a retry at %v, outside [1s, 1.2s]", d)
			}
			distinct[d] = true
		}
		if len(at) != 40 || len(distinct) < 30 {
			t.Errorf("%d retries at %d distinct instants; want 40 spread out", len(at), len(distinct))
		}
	})
}

func FuzzRateLimitWait(f *testing.F) {
	for _, s := range []string{"1500", "0", `"d";r=0;t=5`, "remaining=0, reset=3", "6m0s", "-1", "1e400", "\x00",
		"1000000000000", "100000000000000000000", "9999999h", "2026-12-04T10:00:00Z", "1700000042", "NaN"} {
		f.Add(s, s)
	}
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, h := range []http.Header{
			{"Retry-After-Ms": {a}, "Retry-After": {b}},
			{"Ratelimit": {a}},
			{"Ratelimit-Remaining": {a}, "Ratelimit-Reset": {b}},
			{"X-Ratelimit-Remaining": {a}, "X-Ratelimit-Reset": {b}},
			{"X-Ratelimit-Remaining-Tokens": {a}, "X-Ratelimit-Reset-Tokens": {b}},
			{"X-Amz-Retry-After": {a}, "Ratelimit": {a, b}},
			{"Anthropic-Ratelimit-Tokens-Remaining": {a}, "Anthropic-Ratelimit-Tokens-Reset": {b}},
		} {
			if d, ok := rateLimitWait(h, now); d < 0 || d > maxHint || (!ok && d != 0) {
				t.Fatalf("rateLimitWait(%v) = %v, %v", h, d, ok)
			}
		}
		if d := spread(time.Duration(len(a)) * time.Second); d < time.Duration(len(a))*time.Second {
			t.Fatalf("spread went below the hint")
		}
	})
}

// A hint too large to represent, or longer than WithMaxRetryAfter, returns
// the response at once: it is never read as no hint, which would retry at
// once.
func TestHugeHintsReturnAtOnce(t *testing.T) {
	for _, hd := range []http.Header{
		{"Retry-After-Ms": {"1000000000000"}},
		{"Retry-After-Ms": {"1" + strings.Repeat("0", 400)}},
		{"X-Amz-Retry-After": {"99999999999999999999"}},
		{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"100000000000000000000"}},
		{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"100000000000000000000"}},
		{"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"9999999h"}},
		{"Anthropic-Ratelimit-Requests-Remaining": {"0"}, "Anthropic-Ratelimit-Requests-Reset": {"2999-01-01T00:00:00Z"}},
	} {
		synctest.Test(t, func(t *testing.T) {
			base := retrytest.NewScriptTransport(retrytest.Step{Reply: retrytest.Reply{Status: 429, Header: hd}})
			tr, _ := testTransport(base)
			start := time.Now()
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if base.Count() != 1 || resp.StatusCode != 429 || time.Since(start) != 0 {
				t.Errorf("%v: %d attempts, %d after %v; want the 429 at once", hd, base.Count(), resp.StatusCode, time.Since(start))
			}
		})
	}
}

// FuzzHintMillis: every millisecond hint (retry-after-ms, Azure's
// x-ms-retry-after-ms, AWS's x-amz-retry-after) follows one grammar, digits with a fraction and an
// exponent, no sign: what matches it is a hint (the longest wait there
// is, if too large), what does not is none, in either field alike.
func FuzzHintMillis(f *testing.F) {
	for _, s := range []string{"1500", "1e15", "1.5E3", "25e+2", "1e-3", "0", "-1", "e3", "1e", "1.e3", "inf", "0x10", "1_000", " 7 ", "1e400"} {
		f.Add(s)
	}
	grammar := regexp.MustCompile(`^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := hintMillis(v)
		if want := grammar.MatchString(strings.TrimSpace(v)); ok != want {
			t.Fatalf("hintMillis(%q) ok = %v, want %v (the grammar)", v, ok, want)
		}
		if d < 0 || d > maxHint || (!ok && d != 0) {
			t.Fatalf("hintMillis(%q) = %v, %v", v, d, ok)
		}
		for _, name := range []string{"Retry-After-Ms", "X-Ms-Retry-After-Ms", "X-Amz-Retry-After"} {
			if e, eok := rateLimitWait(http.Header{name: {v}}, now); eok != ok || e != d {
				t.Fatalf("%s: %q = %v, %v; hintMillis says %v, %v", name, v, e, eok, d, ok)
			}
		}
	})
}
