package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

func newTestConfig(t *testing.T, opts ...Option) *config {
	t.Helper()
	c, err := newConfig(retrytest.NewScriptTransport(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// heldCall is a request to host "h" whose retry is about to pass the breaker.
func heldCall(c *config, ctx context.Context) *call {
	k := &call{c: c, ctx: ctx, host: "h", breaker: c.breaker.host("h")}
	if c.budget != nil {
		k.budget = c.budget.hosts.get("h")
	}
	return k
}

func TestBreakerScore(t *testing.T) {
	tests := []struct {
		name     string
		pattern  string // F: an attempt failed, S: the host answered
		repeat   int
		wantOpen bool
	}{
		{"ten fail in a row", "F", 10, true},
		{"nine fail in a row", "F", 9, false},
		{"two in three fail: never", "FFS", 100, false},
		{"three in four fail", "FFFS", 10, true},
		{"half fail", "FS", 100, false},
		{"successes drain the score", "FFFFFFFFFSSSSSF", 1, false},
	}
	for _, tt := range tests {
		c := newTestConfig(t)
		h := c.breaker.host("h")
		for range tt.repeat {
			for _, ch := range tt.pattern {
				if !h.open.Load() {
					if ch == 'F' {
						h.failed(time.Now(), false)
					} else {
						h.succeeded(c.clock)
					}
				}
			}
		}
		if h.open.Load() != tt.wantOpen {
			t.Errorf("%s: open = %v, want %v", tt.name, h.open.Load(), tt.wantOpen)
		}
		if c.breaker.host("other").open.Load() {
			t.Errorf("%s: another host's breaker opened too", tt.name)
		}
	}
}

func trip(h *breakerHost) {
	for range h.b.cfg.Threshold {
		h.failed(time.Now(), false)
	}
}

// While the breaker is open, one held retry at a time goes as the probe;
// when an attempt succeeds, the others are released in the order they
// were held, spaced as they arrived.
func TestBreakerProbeThenPacedRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestConfig(t, WithBudget(nil),
			WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(10 * time.Millisecond), MaxHold: time.Minute}))
		h := c.breaker.host("h")
		trip(h)
		ctx := context.Background()
		limit := time.Now().Add(time.Minute)

		// The first retry to come after the probe delay is the probe.
		if mode, err := heldCall(c, ctx).hold(limit, false); mode != sendProbe || err != nil {
			t.Fatalf("first hold = %v, %v; want the probe", mode, err)
		}
		// While it is in flight, the others wait, arriving 100ms apart.
		const waiters = 5
		type release struct {
			i    int
			mode holdMode
			at   time.Duration
		}
		start := time.Now()
		got := make(chan release, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 100 * time.Millisecond)
				m, err := heldCall(c, ctx).hold(limit, false)
				if err != nil {
					t.Error(err)
				}
				got <- release{i, m, time.Since(start)}
			}()
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("%d retries passed while the probe was in flight", len(got))
		}
		// The probe succeeds at t=1s: the held retries go at 1s + 0, 100ms, ...
		h.succeeded(c.clock)
		wg.Wait()
		close(got)
		for r := range got {
			want := time.Second + time.Duration(r.i)*100*time.Millisecond
			if r.mode != sendReleased || r.at != want {
				t.Errorf("held retry %d: %v at %v, want released at %v", r.i, r.mode, r.at, want)
			}
		}
		if h.open.Load() {
			t.Error("breaker still open after a success")
		}
		if m, err := heldCall(c, ctx).hold(limit, false); m != sendNow || err != nil {
			t.Errorf("closed breaker: hold = %v, %v; want sendNow", m, err)
		}
	})
}

// A failed probe schedules the next one; any failed attempt while open
// pushes it back too, so that traffic that keeps flowing needs no probes.
func TestBreakerFailedProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestConfig(t, WithBudget(nil),
			WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(50 * time.Millisecond), MaxHold: time.Minute}))
		h := c.breaker.host("h")
		trip(h)
		ctx := context.Background()
		limit := time.Now().Add(time.Minute)
		start := time.Now()
		if m, _ := heldCall(c, ctx).hold(limit, false); m != sendProbe || time.Since(start) != 50*time.Millisecond {
			t.Fatalf("probe %v after %v, want sendProbe after 50ms", m, time.Since(start))
		}
		h.failed(time.Now(), true)
		time.Sleep(30 * time.Millisecond)
		h.failed(time.Now(), false) // a first attempt failed: the next probe waits 50ms from here
		start = time.Now()
		if m, _ := heldCall(c, ctx).hold(limit, false); m != sendProbe || time.Since(start) != 50*time.Millisecond {
			t.Errorf("next probe %v after %v, want sendProbe 50ms after the last failure", m, time.Since(start))
		}
	})
}

// A probe is charged to the budget: with none left, no probe goes and the
// retry gives up when its hold ends.
func TestBreakerProbeChargedToBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestConfig(t, WithBudget(NewBudget(0, 0)),
			WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(10 * time.Millisecond)}))
		trip(c.breaker.host("h"))
		start := time.Now()
		_, err := heldCall(c, context.Background()).hold(time.Now().Add(time.Second), false)
		if !errors.Is(err, ErrBreakerHold) || time.Since(start) != time.Second {
			t.Errorf("hold with no budget = %v after %v, want ErrBreakerHold after 1s", err, time.Since(start))
		}
	})
}

func TestBreakerHoldBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestConfig(t, WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(time.Hour)}))
		trip(c.breaker.host("h"))
		start := time.Now()
		if _, err := heldCall(c, context.Background()).hold(time.Now().Add(30*time.Millisecond), false); !errors.Is(err, ErrBreakerHold) || time.Since(start) != 30*time.Millisecond {
			t.Errorf("hold past its limit = %v after %v, want ErrBreakerHold after 30ms", err, time.Since(start))
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		if _, err := heldCall(c, ctx).hold(time.Now().Add(time.Hour), false); !errors.Is(err, context.Canceled) {
			t.Errorf("hold with its context cancelled = %v, want context.Canceled", err)
		}
	})
}

// A held retry is held no longer than its request's backoff schedule at
// the backoff's upper bounds: 200+400+800ms with the defaults.
func TestScheduleLength(t *testing.T) {
	tests := []struct {
		b    Backoff
		max  int
		want time.Duration
	}{
		{FullJitter(200*time.Millisecond, 10*time.Second), 4, 1400 * time.Millisecond},
		{EqualJitter(200*time.Millisecond, 300*time.Millisecond), 4, 800 * time.Millisecond},
		{Exponential(time.Second, time.Minute), 1, 0},
		{Constant(time.Second), 3, 2 * time.Second},
		{DecorrelatedJitter(time.Second, 5*time.Second), 3, 10 * time.Second},
	}
	for _, tt := range tests {
		if got := scheduleLength(tt.b, tt.max); got != tt.want {
			t.Errorf("scheduleLength(%#v, %d) = %v, want %v", tt.b, tt.max, got, tt.want)
		}
	}
}

// With FailFast, first attempts are refused at once while the breaker is
// open, except the probe, and the error says so.
func TestBreakerFailFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := make([]retrytest.Step, 10)
		for i := range steps {
			steps[i].Reply = retrytest.Status(503)
		}
		st := retrytest.NewScriptTransport(steps...)
		tr := New(st, WithMaxAttempts(1), WithRetryBreaker(BreakerConfig{FailFast: true, ProbeBackoff: Constant(time.Second)}))
		for range 10 {
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		_, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		var re *Error
		if !errors.Is(err, ErrCircuitOpen) || !errors.As(err, &re) || re.Reason != GiveUpCircuitOpen || re.Attempts != 0 {
			t.Fatalf("while open: %v, want an *Error with ErrCircuitOpen, reason circuit_open, 0 attempts", err)
		}
		if st.Count() != 10 {
			t.Fatalf("%d attempts sent, want 10: the refused request must send nothing", st.Count())
		}
		time.Sleep(time.Second) // the probe is due: the next request goes, succeeds, closes
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("probe: %v, %v; want 200", resp, err)
		}
		resp.Body.Close()
		if c := tr.c.breaker.host("h"); c.open.Load() {
			t.Error("still open after the probe succeeded")
		}
	})
}

// A base that panics while sending the probe leaves the breaker ready for
// another probe, and the panic reaches the caller.
func TestBreakerProbePanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var panicking atomic.Bool
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if panicking.Load() {
				panic("base")
			}
			return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}}, nil
		})
		tr := New(base, WithMaxAttempts(1), WithRetryBreaker(BreakerConfig{FailFast: true, ProbeBackoff: Constant(time.Second)}))
		for range 10 {
			resp, _ := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			resp.Body.Close()
		}
		time.Sleep(time.Second)
		panicking.Store(true)
		func() {
			defer func() {
				if recover() == nil {
					t.Error("the base's panic did not reach the caller")
				}
			}()
			tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
		}()
		if h := tr.c.breaker.host("h"); h.probing {
			t.Error("the breaker still waits for the probe that panicked")
		}
	})
}

func TestBreakerInvalidConfig(t *testing.T) {
	for _, cfg := range []BreakerConfig{{Threshold: -1}, {MaxHold: -1}} {
		if err := WithRetryBreaker(cfg).apply(&config{}); err == nil {
			t.Errorf("WithRetryBreaker(%+v) accepted", cfg)
		}
	}
}

// An outage of a second, with the defaults: every request fails its first
// attempt; the breaker holds the retries, one probe at a time finds the
// host back, and the held retries are released, so that all succeed with
// about two attempts each. First attempts are never held.
func TestTransportBreakerBridgesBlip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down atomic.Bool
		down.Store(true)
		var attempts atomic.Int64
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			attempts.Add(1)
			code := 200
			if down.Load() {
				code = 503
			}
			return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}}, nil
		})
		tr := New(base)
		const n = 200
		var wg sync.WaitGroup
		var ok atomic.Int64
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
				if err == nil {
					if resp.StatusCode == 200 {
						ok.Add(1)
					}
					resp.Body.Close()
				}
			}()
		}
		time.Sleep(500 * time.Millisecond)
		if got := attempts.Load(); got > n+30 {
			t.Errorf("%d attempts during the outage for %d requests: retries were not held", got, n)
		}
		// A first attempt is never held, even while the breaker is open.
		before := attempts.Load()
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(shortCtx(t, time.Millisecond)))
		if err == nil {
			resp.Body.Close()
		}
		if attempts.Load() != before+1 {
			t.Error("a first attempt was held by the open breaker")
		}
		time.Sleep(500 * time.Millisecond)
		down.Store(false)
		wg.Wait()
		if ok.Load() != n {
			t.Errorf("%d of %d requests succeeded after a 1s outage, want all", ok.Load(), n)
		}
		if got := attempts.Load(); got > 2*n+40 {
			t.Errorf("%d attempts for %d requests, want about 2 each", got, n)
		}
	})
}

// A long outage is shed: a retry that nothing releases gives up within its
// own backoff schedule (1.4s with the defaults) with its last response.
func TestTransportBreakerShedsLongOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts atomic.Int64
		base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			attempts.Add(1)
			return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}}, nil
		})
		tr := New(base)
		const n = 200
		var wg sync.WaitGroup
		var slowest atomic.Int64
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
				if err != nil || resp.StatusCode != 503 {
					t.Errorf("RoundTrip = %v, %v; want the last 503", resp, err)
					return
				}
				resp.Body.Close()
				for d := int64(time.Since(start)); ; {
					s := slowest.Load()
					if d <= s || slowest.CompareAndSwap(s, d) {
						break
					}
				}
			}()
		}
		wg.Wait()
		if d := time.Duration(slowest.Load()); d > 1400*time.Millisecond {
			t.Errorf("the slowest request failed after %v, want within its 1.4s schedule", d)
		}
		if got := attempts.Load(); got > n*13/10 {
			t.Errorf("%d attempts for %d requests in an outage, want at most 1.3 each", got, n)
		}
	})
}

func shortCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// With many retries held, a failed probe wakes one of them (the one that
// watches the probe timer), not all: a probe cycle costs O(1) allocations,
// however many are held.
func TestBreakerProbeCycleWakesOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestConfig(t, WithBudget(nil),
			WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(10 * time.Millisecond), MaxHold: time.Hour}))
		h := c.breaker.host("h")
		trip(h)
		const held = 2000
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		probes := make(chan struct{}, held)
		var wg sync.WaitGroup
		for range held {
			wg.Add(1)
			go func() {
				defer wg.Done()
				limit := time.Now().Add(time.Hour)
				for {
					m, err := heldCall(c, ctx).hold(limit, false)
					if err != nil || m != sendProbe {
						return
					}
					probes <- struct{}{}
				}
			}()
		}
		time.Sleep(20 * time.Millisecond)
		synctest.Wait()
		<-probes
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const cycles = 50
		for range cycles {
			h.failed(time.Now(), true) // the probe failed
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			<-probes // the next one went
		}
		runtime.ReadMemStats(&after)
		if per := float64(after.Mallocs-before.Mallocs) / cycles; per > 50 {
			t.Errorf("%.0f allocations per probe cycle with %d retries held, want O(1)", per, held)
		}
		h.succeeded(c.clock)
		cancel()
		wg.Wait()
	})
}

// With FailFast, every sixth request that would be refused goes as the
// probe, if the probe backoff has not come first: probes follow traffic.
func TestBreakerFailFastProbesEverySixth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := make([]retrytest.Step, 0, 20)
		for range 20 {
			steps = append(steps, retrytest.Step{Reply: retrytest.Status(503)})
		}
		st := retrytest.NewScriptTransport(steps...)
		tr := New(st, WithMaxAttempts(1), WithRetryBreaker(BreakerConfig{FailFast: true, ProbeBackoff: Constant(time.Hour)}))
		var sent []int
		for i := range 30 {
			before := st.Count()
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil))
			if err == nil {
				resp.Body.Close()
			}
			if st.Count() > before && i >= 10 {
				sent = append(sent, i)
			}
		}
		if want := []int{15, 21, 27}; fmt.Sprint(sent) != fmt.Sprint(want) {
			t.Errorf("after the breaker opened, requests %v went out, want %v: every sixth", sent, want)
		}
	})
}

// host returns h's breaker, as of second 0.
func (b *breaker) host(h string) *breakerHost { return b.hosts.get(h) }
