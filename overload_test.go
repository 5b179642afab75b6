package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

// The budget's promises under load, in virtual time: what a host that is
// overloaded or always failing receives from the defaults.

// A caller that sends one request at a time to a host that always fails
// sends at most (1 + ratio) × its requests (the probes are retries, and
// charged), however its budget is set.
func TestSequentialCallerWithinBudget(t *testing.T) {
	for _, tt := range []struct {
		budget *Budget
		n      int
		max    int64
	}{
		{nil, 300, 330},                  // the default: NewBudget(0.1, 10)
		{NewBudget(0.1, 2), 200, 220},    // a floor of 6 in 3 s
		{NewBudget(0, 0.1), 3, 4},        // one retry in 10 s
		{NewBudget(0.1, 10), 1000, 1100}, // longer than the window
	} {
		synctest.Test(t, func(t *testing.T) {
			base := newFailing()
			base.latency = 100 * time.Microsecond
			opts := []Option{WithBackoff(Constant(0))}
			if tt.budget != nil {
				opts = append(opts, WithBudget(tt.budget))
			}
			tr := New(base, opts...)
			for range tt.n {
				resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			if got := base.attempts.Load(); got > tt.max {
				t.Errorf("budget %+v: %d sequential requests to a host that always fails made %d attempts, want at most %d",
					tt.budget, tt.n, got, tt.max)
			}
		})
	}
}

// An overloaded host serves rate requests a second and refuses the rest
// at once: retries add at most the budget's share to what it receives,
// 1.1 × the requests, whatever the overload.
func TestOverloadWithinBudget(t *testing.T) {
	for _, k := range []int{2, 4} {
		synctest.Test(t, func(t *testing.T) {
			const rate = 500
			var mu sync.Mutex
			var tokens float64
			last := time.Now()
			var attempts atomic.Int64
			base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
				attempts.Add(1)
				mu.Lock()
				now := time.Now()
				tokens = min(tokens+now.Sub(last).Seconds()*rate, rate/20)
				last = now
				ok := tokens >= 1
				if ok {
					tokens--
				}
				mu.Unlock()
				code := 200
				if !ok {
					code = 503
				}
				return respond(code), nil
			})
			tr := New(base)
			n := 5 * rate * k // 5 s at k × the capacity
			var wg sync.WaitGroup
			for i := range n {
				time.Sleep(time.Second / time.Duration(rate*k))
				_ = i
				wg.Go(func() {
					resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
					if err == nil {
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			if got, max := attempts.Load(), int64(float64(n)*1.1)+20; got > max {
				t.Errorf("%d× overload: %d requests made %d attempts (%.3f each), want at most %d", k, n, got, float64(got)/float64(n), max)
			}
		})
	}
}

// A retry that the budget refuses gives up at once with its response,
// whatever the host's state and whatever the server asks to wait: never a
// wait for a retry that will not be sent.
func TestBudgetRefusalNeverWaits(t *testing.T) {
	for _, breaker := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			base := newFailing()
			base.header = http.Header{"Retry-After": {"20"}}
			opts := []Option{WithBudget(NewBudget(0, 0))}
			if !breaker {
				opts = append(opts, WithoutRetryBreaker())
			}
			tr := New(base, opts...)
			for range 12 {
				time.Sleep(5 * time.Millisecond) // the host is failing after a few
				start := time.Now()
				resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
				if err != nil || resp.StatusCode != 503 || time.Since(start) != 0 {
					t.Fatalf("breaker %v: RoundTrip = %v, %v after %v; want the 503 at once", breaker, resp, err, time.Since(start))
				}
				resp.Body.Close()
			}
		})
	}
}

// FailFast: when the breaker opens while a retry waits, the retry gives up
// with its last response, as the same give-up decided before the wait
// does; not with an error.
func TestFailFastKeepsResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newFailing()
		tr := New(base, WithBackoff(Constant(100*time.Millisecond)), WithoutBudget(),
			WithRetryBreaker(BreakerConfig{FailFast: true, ProbeBackoff: Constant(time.Hour)}))
		done := make(chan error, 1)
		go func() {
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			if err == nil {
				if resp.StatusCode != 503 {
					err = errors.New(resp.Status)
				}
				resp.Body.Close()
			}
			done <- err
		}()
		openBreaker(t, tr, new(atomic.Bool)) // others' failures open it while its retry waits
		if err := <-done; err != nil {
			t.Errorf("a retry refused by FailFast after its wait ended with %v, want its 503", err)
		}
	})
}

// servesRate is a base that serves rate requests a second, one at a time
// (no burst), and answers the rest at once with a 503: a host that is
// overloaded, not out. full: its first request is served; otherwise the
// requests before its first turn fail, as if it had been out.
func servesRate(rate float64, full bool) http.RoundTripper {
	var mu sync.Mutex
	tokens := 0.0
	if full {
		tokens = 1
	}
	last := time.Now()
	return retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		now := time.Now()
		tokens = min(tokens+now.Sub(last).Seconds()*rate, 1)
		last = now
		ok := tokens >= 1
		if ok {
			tokens--
		}
		mu.Unlock()
		if ok {
			return reply(r, 200, nil), nil
		}
		return reply(r, 503, nil), nil
	})
}

// overloadCall is what the attempt hook saw of one call: how its last
// attempt ended, and the give-up that followed it, if any.
type overloadCall struct {
	reason GiveUpReason
	end    time.Time
}

type overloadCallKey struct{}

// An overload is no outage, and holds nothing: a host that serves 10
// requests a second and refuses the other 190 at once (docs/overload.md),
// offered 200 a second, with a breaker that never opens. Once the host
// has been seen serving some (from its first turn, 100ms in), each retry
// is sent, within the budget, or gives up at once, reason budget: no call
// gives up for the breaker, and none gets its 503 back later than it
// came. (Before its first answer, a host that has never answered is in an
// outage by the rule, and the few retries held then go as a slow start.)
func TestOverloadHoldsNoRetry(t *testing.T) {
	hook := WithAttemptHook(func(ctx context.Context, _ AttemptStart) (context.Context, func(AttemptEnd)) {
		c := ctx.Value(overloadCallKey{}).(*overloadCall)
		return ctx, func(e AttemptEnd) { c.reason, c.end = e.GiveUp, e.End }
	})
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("first served %v", full), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := New(servesRate(10, full), hook, WithRetryBreaker(BreakerConfig{Threshold: 1_000_000}))
				seen := time.Now().Add(100 * time.Millisecond) // the host's first turn
				var calls, held, budget atomic.Int64
				var wg sync.WaitGroup
				for range 200 * 4 { // 4 s at 200 a second
					time.Sleep(5 * time.Millisecond)
					wg.Go(func() {
						var c overloadCall
						req := newRequest(t, "GET", "http://h/", nil)
						counted := time.Now().After(seen)
						resp, err := tr.RoundTrip(req.WithContext(context.WithValue(req.Context(), overloadCallKey{}, &c)))
						if err != nil {
							t.Errorf("RoundTrip: %v", err)
							return
						}
						resp.Body.Close()
						switch {
						case !counted:
						case c.reason == GiveUpBreaker || (resp.StatusCode == 503 && time.Since(c.end) > 100*time.Millisecond):
							held.Add(1)
						case c.reason == GiveUpBudget:
							budget.Add(1)
						}
						if counted {
							calls.Add(1)
						}
					})
				}
				wg.Wait()
				if n := held.Load(); n != 0 || budget.Load() == 0 {
					t.Errorf("%d of %d calls held (given up for the breaker, or their 503 returned over 100ms after it came), want none; %d gave up for the budget, want some",
						n, calls.Load(), budget.Load())
				}
			})
		})
	}
}
