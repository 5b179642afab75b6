package retryhttp

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

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
				return reply(nil, 429, http.Header{"Retry-After": {"1"}}), nil
			}
			at = append(at, time.Since(start))
			return respond(200), nil
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
