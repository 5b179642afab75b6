package retryhttp

// Regressions found in review: each pacer against the paths around it.

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

func getOK(t *testing.T, tr http.RoundTripper, ctx context.Context) error {
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// Hedged copies would take no slot, turn or quota: with those pacers, a
// request is not hedged.
func TestPacersTurnHedgingOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cur, peak atomic.Int64
		base := &scripted{answer: func(_ int64, r *http.Request) (*http.Response, error) {
			n := cur.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			defer cur.Add(-1)
			select {
			case <-time.After(time.Second):
			case <-r.Context().Done():
			}
			return reply(r, 200, nil), nil
		}}
		tr := New(base, WithConcurrencyLimit(1, 1), WithoutBudget(),
			WithHedging(HedgeConfig{Delay: 10 * time.Millisecond, MaxExtra: 3}))
		if err := getOK(t, tr, context.Background()); err != nil {
			t.Fatal(err)
		}
		if p := peak.Load(); p > 1 {
			t.Errorf("WithConcurrencyLimit(1,1): %d attempts in flight to the host at once", p)
		}
	})
}

// A request whose context ends while it waits for its turn gives the
// turn back.
func TestRateTurnGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(_ int64, r *http.Request) (*http.Response, error) { return reply(r, 200, nil), nil }}
		tr := New(base, WithRateLimit(1, 1))
		began := time.Now()
		if err := getOK(t, tr, context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		if err := getOK(t, tr, ctx); err == nil {
			t.Fatal("want canceled")
		}
		if err := getOK(t, tr, context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took != time.Second {
			t.Errorf("second request sent at %v, want 1s: the canceled one kept its token", took)
		}
	})
}

// A reset given as a Unix time in milliseconds is read as one, not as
// 136 years from now, which would refuse the host for good.
func TestQuotaIgnoresAMisreadReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(n int64, r *http.Request) (*http.Response, error) {
			h := http.Header{}
			if n == 1 {
				h.Set("X-RateLimit-Remaining", "0")
				h.Set("X-RateLimit-Reset", "1700000060000") // epoch ms
			}
			return reply(r, 200, h), nil
		}}
		tr := New(base, WithQuotaPacing(10*time.Second, false))
		getOK(t, tr, context.Background())
		time.Sleep(24 * time.Hour)
		err := getOK(t, tr, context.Background())
		if err != nil {
			t.Errorf("a day later: %v; host quiet for eviction: %v", err, hostOf(tr, "h").Idle)
		}
	})
}

// An attempt that reached its deadline is a refusal for the throttle: a
// host that hangs is throttled.
func TestThrottleCountsDeadlinesAsRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(_ int64, r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return nil, r.Context().Err()
		}}
		tr := New(base, WithThrottle(1.5), WithMaxAttempts(1))
		refused := 0
		for range 200 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			if err := getOK(t, tr, ctx); err != nil {
				if e, ok := err.(*Error); ok && e.Reason == GiveUpThrottled {
					refused++
				}
			}
			cancel()
		}
		if refused < 100 {
			t.Errorf("a host that answered none of 200: %d refused by the throttle, sent %d", refused, base.n.Load())
		}
	})
}

// A canceled attempt says only that the host was at least that slow: it
// is not the fastest answer, against which the others would look slow.
func TestLimitLearnsNothingFastFromACancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(_ int64, r *http.Request) (*http.Response, error) {
			select {
			case <-time.After(10 * time.Millisecond):
				return reply(r, 200, nil), nil
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}}
		tr := New(base, WithConcurrencyLimit(1, 8))
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		getOK(t, tr, ctx)
		cancel()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 50 {
					getOK(t, tr, context.Background())
				}
			})
		}
		wg.Wait()
		if l := hostOf(tr, "h").Limit; l < 7 {
			t.Errorf("limit %.1f after 400 answers in 10 ms each (one canceled at 1 ms first), want about 8", l)
		}
	})
}

// A first attempt whose caller cancels it while it waits for a pacer ends
// with the context's error and is no refusal: retryhttp_giveups_total
// does not count it, so that a burst of cancellations does not look like
// the pacer shedding load.
func TestPacerWaitCanceledIsTheCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMetrics()
		var sent atomic.Int64
		tr := New(retrytest.RoundTripperFunc(func(*http.Request) (*http.Response, error) {
			sent.Add(1)
			return respond(200), nil
		}), WithRateLimit(1, 1), WithMetrics(m))
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil)) // takes the turn
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(500*time.Millisecond, cancel)
		_, err = tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
		var re *Error
		if !errors.As(err, &re) || re.Attempts != 0 || re.Reason != "" || !errors.Is(err, context.Canceled) {
			t.Errorf("canceled while it waited for its turn: %v; want an *Error with no attempt and no reason, wrapping context.Canceled", err)
		}
		if got := sumCounter(t, m, "retryhttp_giveups_total"); got != 0 || sent.Load() != 1 {
			t.Errorf("giveups_total %v, %d sent; want 0 and 1", got, sent.Load())
		}
	})
}

// A retry whose deadline comes while it waits in the concurrency limit's
// line gives up like any other: with its last response, reason deadline.
func TestRetryWaitingForLimitKeepsResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMetrics()
		tr := New(retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/slow" {
				time.Sleep(5 * time.Second) // holds the only slot
				return respond(200), nil
			}
			return respond(503), nil
		}), WithConcurrencyLimit(1, 1), WithBackoff(Constant(100*time.Millisecond)), WithMetrics(m))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(time.Millisecond) // the failing request's first attempt is answered; its retry waits 100ms
			if resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/slow", nil)); err == nil {
				resp.Body.Close() // it held the only slot for 5 s
			}
		})
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/fail", nil).WithContext(ctx))
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("a retry in the limit's line at its deadline: %v, %v; want its 503", resp, err)
		}
		resp.Body.Close()
		wg.Wait()
		if got := sumCounter(t, m, "retryhttp_giveups_total"); got < 1 {
			t.Errorf("giveups_total %v: want the deadline counted", got)
		}
	})
}

// The static rate gives back a turn not used: a waiter canceled in the
// line moves those behind it up, so that no turn goes unsent while others
// wait. At 1/s: A sends at 0; B, then C, wait; B is canceled at 0.5s; C
// sends at 1s (not 2s), and D, arriving at 1.2s, at 2s.
func TestRateLimitCanceledTurnGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var sends []time.Duration
		tr := New(retrytest.RoundTripperFunc(func(*http.Request) (*http.Response, error) {
			mu.Lock()
			sends = append(sends, time.Since(start))
			mu.Unlock()
			return respond(200), nil
		}), WithRateLimit(1, 1))
		get := func(ctx context.Context) {
			if resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx)); err == nil {
				resp.Body.Close()
			}
		}
		var wg sync.WaitGroup
		get(context.Background()) // A
		bctx, cancelB := context.WithCancel(context.Background())
		wg.Go(func() { get(bctx) })
		time.Sleep(100 * time.Millisecond)
		wg.Go(func() { get(context.Background()) }) // C, behind B
		time.Sleep(400 * time.Millisecond)
		cancelB()
		time.Sleep(700 * time.Millisecond)
		wg.Go(func() { get(context.Background()) }) // D, at 1.2s
		wg.Wait()
		want := []time.Duration{0, time.Second, 2 * time.Second}
		if len(sends) != len(want) {
			t.Fatalf("sends at %v, want at %v", sends, want)
		}
		for i := range want {
			if sends[i] != want[i] {
				t.Errorf("sends at %v, want at %v", sends, want)
				break
			}
		}
	})
}
