package retryhttp

import (
	"context"
	"net/http"
	"strconv"
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
	for _, s := range []string{"1500", "0", `"d";r=0;t=5`, "remaining=0, reset=3", "6m0s", "-1", "1e400", "\x00"} {
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
		} {
			if d, ok := rateLimitWait(h, now); d < 0 || (!ok && d != 0) {
				t.Fatalf("rateLimitWait(%v) = %v, %v", h, d, ok)
			}
		}
		if d := spread(time.Duration(len(a)) * time.Second); d < time.Duration(len(a))*time.Second {
			t.Fatalf("spread went below the hint")
		}
	})
}
