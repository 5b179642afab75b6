package retryhttp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// scripted is a base whose answers a function gives; it counts what
// reached it.
type scripted struct {
	n      atomic.Int64
	answer func(n int64, r *http.Request) (*http.Response, error)
}

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	return s.answer(s.n.Add(1), r)
}

// refusedAs checks that err is a pacer's refusal: an *Error with no
// attempt and the reason.
func refusedAs(t *testing.T, err error, reason GiveUpReason) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Reason != reason || e.Attempts != 0 {
		t.Fatalf("got %v, want an *Error with no attempt, reason %s", err, reason)
	}
}

// A host that refuses everything: the throttle soon refuses most first
// attempts, sends nothing for them, and says why.
func TestThrottleRefusesThroughRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(_ int64, r *http.Request) (*http.Response, error) { return reply(r, 503, nil), nil }}
		m := NewMetrics()
		reg := prometheus.NewRegistry()
		reg.MustRegister(m)
		tr := New(base, WithThrottle(1.25), WithMaxAttempts(1), WithMetrics(m))
		refused := 0
		for range 400 {
			time.Sleep(5 * time.Millisecond) // 200 a second, for 2 s
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			if err != nil {
				refusedAs(t, err, GiveUpThrottled)
				if !errors.Is(err, errRefused) {
					t.Fatalf("%v does not wrap the refusal", err)
				}
				refused++
				continue
			}
			resp.Body.Close()
		}
		if sent := int(base.n.Load()); sent+refused != 400 || sent > 80 {
			t.Errorf("%d sent and %d refused of 400 to a host that refuses all, want at most 80 sent", sent, refused)
		}
		if got := testutil.ToFloat64(m.giveups.WithLabelValues("default", "throttled", "default")); int(got) != refused {
			t.Errorf("retryhttp_giveups_total{reason=throttled} = %v, want %d", got, refused)
		}
		if got := testutil.ToFloat64(m.pacer[gaugeThrottle].WithLabelValues("default")); got < 0.9 {
			t.Errorf("retryhttp_throttle_refusal_ratio = %v, want near 1", got)
		}
	})
}

// A fixed limit of one: a second request waits for the first, within its
// deadline; past it, it ends with the reason and the context's error, and
// reaches nothing.
func TestConcurrencyLimitThroughRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		base := &scripted{answer: func(n int64, r *http.Request) (*http.Response, error) {
			if n == 1 {
				<-release
			}
			return reply(r, 200, nil), nil
		}}
		tr := New(base, WithConcurrencyLimit(1, 1))
		done := make(chan error, 1)
		go func() {
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
		refusedAs(t, err, GiveUpLimit)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%v: want the deadline's error", err)
		}
		// One that waits in line gets the slot as the first ends.
		second := make(chan error, 1)
		go func() {
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			if err == nil {
				resp.Body.Close()
			}
			second <- err
		}()
		synctest.Wait()
		if n := base.n.Load(); n != 1 {
			t.Fatalf("%d requests reached the host, want 1: the others wait", n)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := <-second; err != nil {
			t.Fatal(err)
		}
		if n := base.n.Load(); n != 2 {
			t.Errorf("%d requests reached the host, want 2", n)
		}
	})
}

// Quota pacing: a host that says its quota is spent for 2 s; the next
// request waits for it, one whose deadline comes first is refused at
// once, and a retry that would wait too long gives up with its last
// response.
func TestQuotaPacingThroughRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := &scripted{answer: func(n int64, r *http.Request) (*http.Response, error) {
			h := http.Header{}
			left := 2 - time.Since(start).Round(time.Second)/time.Second
			if left > 0 {
				h.Set("RateLimit", `"default";r=0;t=`+string(rune('0'+left)))
			}
			return reply(r, 200, h), nil
		}}
		tr := New(base, WithQuotaPacing(10*time.Second, false))
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		began := time.Now()
		_, err = tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
		refusedAs(t, err, GiveUpQuota)
		if time.Since(began) != 0 || base.n.Load() != 1 {
			t.Errorf("refused after %v with %d sent, want at once, nothing sent", time.Since(began), base.n.Load()-1)
		}
		resp, err = tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if waited := time.Since(began); waited < 2*time.Second || waited > 2*time.Second+300*time.Millisecond {
			t.Errorf("waited %v for a quota that resets in 2 s, want 2 s plus at most a tenth", waited)
		}
	})
}

// A static rate: one a second; a request whose turn comes past its
// deadline is refused at once and takes no turn.
func TestRateLimitThroughRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(_ int64, r *http.Request) (*http.Response, error) { return reply(r, 200, nil), nil }}
		tr := New(base, WithRateLimit(1, 1))
		get := func(ctx context.Context) error {
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(ctx))
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		began := time.Now()
		if err := get(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		refusedAs(t, get(ctx), GiveUpRate)
		if err := get(context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took != time.Second {
			t.Errorf("two requests at one a second took %v, want 1s (the refused one took no turn)", took)
		}
	})
}

// A retry that quota pacing refuses gives up with its last response, and
// every slot of the limit is given back, whatever way attempts end.
func TestPacersGiveBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(n int64, r *http.Request) (*http.Response, error) {
			switch n % 4 {
			case 0:
				return nil, errors.New("connection reset by peer")
			case 1:
				h := http.Header{}
				h.Set("Retry-After", "30")
				return reply(r, 429, h), nil
			case 2:
				panic("base panicked")
			}
			return reply(r, 503, nil), nil
		}}
		tr := New(base, WithConcurrencyLimit(2, 2), WithQuotaPacing(5*time.Second, false), WithMaxRetryAfter(time.Minute),
			WithBackoff(Constant(time.Millisecond)))
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				defer func() { recover() }()
				resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
				if err == nil {
					if resp.StatusCode == 429 && !strings.Contains(resp.Header.Get("Retry-After"), "30") {
						t.Errorf("gave up with a response that is not the last")
					}
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		if v := hostOf(tr, "h"); v.InFlight != 0 || v.Waiting != 0 {
			t.Errorf("after every request ended: %d slots in use, %d waiting, want none", v.InFlight, v.Waiting)
		}
	})
}

// Each pacer's option refuses bad values, naming itself.
func TestPacerOptionsRefuseBadValues(t *testing.T) {
	for _, o := range []Option{WithThrottle(0.5), WithConcurrencyLimit(0, 4), WithConcurrencyLimit(5, 4),
		WithQuotaPacing(0, false), WithRateLimit(0, 1), WithRateLimit(1, 0)} {
		_, err := newConfig(nil, []Option{o})
		if err == nil || !strings.Contains(err.Error(), o.optionName()) {
			t.Errorf("%s: got %v, want an error naming it", o.optionName(), err)
		}
	}
}

// An adaptive limit times an attempt from when it is sent, not from when
// its request began to wait in line: a host that answers every attempt
// in 10 ms keeps its limit, however long the line.
func TestConcurrencyLimitTimesFromTheSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answer: func(_ int64, r *http.Request) (*http.Response, error) {
			time.Sleep(10 * time.Millisecond)
			return reply(r, 200, nil), nil
		}}
		tr := New(base, WithConcurrencyLimit(1, 8))
		var wg sync.WaitGroup
		for range 8 { // 8 callers, one request after another, more than the limit lets go at once
			wg.Go(func() {
				for range 50 {
					resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
				}
			})
		}
		for range 8 {
			wg.Go(func() {
				for range 50 {
					resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
					if err == nil {
						resp.Body.Close()
					}
				}
			})
		}
		wg.Wait()
		if l := hostOf(tr, "h").Limit; l < 7 {
			t.Errorf("limit %.1f after 800 requests answered in 10 ms each, want about 8", l)
		}
	})
}
