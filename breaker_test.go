package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
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

// heldCall is a request to host "h" whose retry is about to be held.
func heldCall(c *config, ctx context.Context) *call {
	return &call{c: c, ctx: ctx, t: ticket{ctx: ctx, hs: c.gate.hosts.get("h")}}
}

// hostOf returns the admission state of host h.
func hostOf(tr *Transport, h string) *hostState { return tr.c.gate.hosts.get(h) }

// feed records attempts to hs as the pattern says (F: failed in a way
// worth retrying, S: answered), 2ms apart.
func feed(c *config, hs *hostState, pattern string) {
	k := &call{c: c, t: ticket{hs: hs}}
	for _, ch := range pattern {
		time.Sleep(2 * time.Millisecond)
		k.t.start = mono()
		r := result{retryable: ch == 'F'}
		c.gate.record(&k.t, &r)
	}
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
		synctest.Test(t, func(t *testing.T) {
			c := newTestConfig(t)
			h := c.gate.hosts.get("h")
			for range tt.repeat {
				for _, ch := range tt.pattern {
					if !h.cb.isOpen.Load() {
						feed(c, h, string(ch))
					}
				}
			}
			if h.cb.isOpen.Load() != tt.wantOpen {
				t.Errorf("%s: open = %v, want %v", tt.name, h.cb.isOpen.Load(), tt.wantOpen)
			}
			if c.gate.hosts.get("other").cb.isOpen.Load() {
				t.Errorf("%s: another host's breaker opened too", tt.name)
			}
		})
	}
}

// Failures that all come in one instant open nothing: the host is failing
// only once its failures have lasted minFailingSpan.
func TestBreakerNeedsFailuresOverTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestConfig(t)
		h := c.gate.hosts.get("h")
		k := &call{c: c, t: ticket{hs: h}}
		for range 50 {
			c.gate.record(&k.t, &result{retryable: true})
		}
		if h.cb.isOpen.Load() {
			t.Fatal("50 failures in one instant opened the breaker")
		}
		time.Sleep(minFailingSpan)
		c.gate.record(&k.t, &result{retryable: true})
		if !h.cb.isOpen.Load() {
			t.Fatal("failures over 10ms did not open the breaker")
		}
	})
}

func trip(c *config, h *hostState) { feed(c, h, strings.Repeat("F", c.gate.breaker.Threshold)) }

// held runs a hold for a retry of host h with the given limit, and says
// how it ended: "probe", "released", "breaker", or the error.
func held(c *config, ctx context.Context, limit time.Time) string {
	s, _ := heldK(c, ctx, limit)
	return s
}

func heldK(c *config, ctx context.Context, limit time.Time) (string, *call) {
	k := heldCall(c, ctx)
	return heldHow(c, k, limit), k
}

func heldHow(c *config, k *call, limit time.Time) string {
	reason, err := c.gate.hold(&k.t, time.Now(), limit)
	switch {
	case err != nil:
		return err.Error()
	case reason != "":
		return string(reason)
	case k.t.p.probe != 0:
		return "probe"
	}
	return "released"
}

// While the breaker is open, one held retry at a time goes as the probe;
// when an attempt succeeds, the others go onto the ramp: a few at once,
// more with each answer after, and the rest by their paced turn (as long
// after the answer as they were due after the first of them) at the
// latest.
func TestBreakerProbeThenRamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestConfig(t, WithoutBudget(),
			WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(10 * time.Millisecond), MaxHold: time.Minute, ProbeTimeout: time.Hour}))
		h := c.gate.hosts.get("h")
		trip(c, h)
		ctx := context.Background()
		limit := time.Now().Add(time.Minute)

		// The first retry to come after the probe delay is the probe.
		if got := held(c, ctx, limit); got != "probe" {
			t.Fatalf("first hold = %s; want the probe", got)
		}
		// While it is in flight, the others wait, arriving 100ms apart.
		const waiters = 5
		type release struct {
			i   int
			how string
			at  time.Duration
		}
		start := time.Now()
		got := make(chan release, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 100 * time.Millisecond)
				got <- release{i, held(c, ctx, limit), time.Since(start)}
			}()
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("%d retries passed while the probe was in flight", len(got))
		}
		feed(c, h, "S") // a first attempt is answered at 1.002s: three go (the slow start)
		feed(c, h, "S") // another at 1.004s: one more (a first attempt's answer frees its place only)
		wg.Wait()
		close(got)
		want := []time.Duration{1002, 1002, 1002, 1004, 1402} // ms: the last at its turn
		for r := range got {
			if w := want[r.i] * time.Millisecond; r.how != "released" || r.at != w {
				t.Errorf("held retry %d: %s at %v, want released at %v", r.i, r.how, r.at, w)
			}
		}
		if h.cb.isOpen.Load() {
			t.Error("breaker still open after a success")
		}
	})
}

// A failed probe schedules the next one at ProbeBackoff after it; a first
// attempt that fails meanwhile pushes it back, so that traffic that keeps
// flowing needs no probes.
func TestBreakerFailedProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestConfig(t, WithoutBudget(),
			WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(50 * time.Millisecond), MaxHold: time.Minute}))
		h := c.gate.hosts.get("h")
		trip(c, h)
		ctx := context.Background()
		limit := time.Now().Add(time.Minute)
		start := time.Now()
		got, probe := heldK(c, ctx, limit)
		if got != "probe" || time.Since(start) != 50*time.Millisecond {
			t.Fatalf("probe %s after %v, want the probe 50ms after the breaker opened", got, time.Since(start))
		}
		probe.t.start = mono()
		c.gate.record(&probe.t, &result{retryable: true}) // the probe failed
		go func() {
			time.Sleep(30 * time.Millisecond)
			feed(c, h, "F") // a first attempt failed at 32ms: the next probe waits 50ms from there
		}()
		start = time.Now()
		if got := held(c, ctx, limit); got != "probe" || time.Since(start) != 82*time.Millisecond {
			t.Errorf("next probe %s after %v, want the probe 50ms after the last failure", got, time.Since(start))
		}
	})
}

// Every retry that leaves a hold is charged to the budget: with none, no
// probe goes, and at its limit the retry gives up, reason budget, having
// sent nothing.
func TestBreakerProbeChargedToBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestConfig(t, WithBudget(NewBudget(0, 0)),
			WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(10 * time.Millisecond)}))
		trip(c, c.gate.hosts.get("h"))
		start := time.Now()
		if got := held(c, context.Background(), time.Now().Add(time.Second)); got != "budget" || time.Since(start) != time.Second {
			t.Errorf("hold with no budget = %s after %v, want budget at its limit, 1s", got, time.Since(start))
		}
	})
}

// A held retry gives up at its limit once a retry or a probe has failed
// since the host last answered; failed first attempts alone (requests
// that each fail once) do not make it give up: it goes. Nothing keeps it
// past its limit, not a probe in flight that hangs. A cancelled context
// ends the hold.
func TestBreakerHoldBounded(t *testing.T) {
	for _, tt := range []struct {
		retryFailed bool // a retry failed after the breaker opened, before the hold
		attempt     int  // the attempt that fails while it is held
		hung        bool // another retry is the probe in flight, and hangs
		want        string
	}{{false, 2, false, "breaker"}, {false, 1, false, "released"}, {true, 1, false, "breaker"}, {false, 1, true, "released"}} {
		synctest.Test(t, func(t *testing.T) {
			c := newTestConfig(t, WithoutBudget(), WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(time.Millisecond), ProbeTimeout: time.Hour}))
			h := c.gate.hosts.get("h")
			trip(c, h)
			if tt.retryFailed {
				k := &call{c: c, t: ticket{hs: h}}
				c.gate.sending(&k.t, 2)
				c.gate.record(&k.t, &result{retryable: true})
			}
			if tt.hung {
				if got := held(c, context.Background(), time.Now().Add(time.Hour)); got != "probe" {
					t.Fatalf("first hold = %s, want the probe", got)
				}
			} else {
				h.cb.mu.Lock()
				h.cb.nextProbe = time.Now().Add(time.Hour)
				h.cb.mu.Unlock()
			}
			go func() {
				time.Sleep(10 * time.Millisecond)
				k := &call{c: c, t: ticket{hs: h}}
				c.gate.sending(&k.t, tt.attempt) // sent while a retry is held
				c.gate.record(&k.t, &result{retryable: true})
			}()
			start := time.Now()
			if got := held(c, context.Background(), time.Now().Add(30*time.Millisecond)); got != tt.want || time.Since(start) != 30*time.Millisecond {
				t.Errorf("hold past its limit, attempt %d failed meanwhile (a retry before: %v, hung probe: %v) = %s after %v, want %s after 30ms",
					tt.attempt, tt.retryFailed, tt.hung, got, time.Since(start), tt.want)
			}
		})
	}
	synctest.Test(t, func(t *testing.T) {
		c := newTestConfig(t, WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(time.Hour)}))
		trip(c, c.gate.hosts.get("h"))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		if got := held(c, ctx, time.Now().Add(time.Hour)); got != context.Canceled.Error() {
			t.Errorf("hold with its context cancelled = %s, want context.Canceled", got)
		}
	})
}

// A held retry is held no longer than its request's backoff schedule at
// the backoff's upper bounds: 400+800+1600ms with the defaults.
func TestScheduleLength(t *testing.T) {
	tests := []struct {
		b    Backoff
		max  int
		want time.Duration
	}{
		{FullJitter(200*time.Millisecond, 10*time.Second), 4, 2800 * time.Millisecond},
		{EqualJitter(200*time.Millisecond, 300*time.Millisecond), 4, 900 * time.Millisecond},
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
			time.Sleep(2 * time.Millisecond) // failures over time, not in one instant
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
		if hostOf(tr, "h").cb.isOpen.Load() {
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
			time.Sleep(2 * time.Millisecond)
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
		if h := hostOf(tr, "h"); h.cb.probing != 0 {
			t.Error("the breaker still waits for the probe that panicked")
		}
	})
}

func TestBreakerInvalidConfig(t *testing.T) {
	for _, cfg := range []BreakerConfig{{Threshold: -1}, {MaxHold: -1}, {Threshold: 1 << 32},
		{Threshold: maxThreshold + 1}, {ProbeTimeout: -1}} {
		if err := WithRetryBreaker(cfg).apply(&config{}); err == nil {
			t.Errorf("WithRetryBreaker(%+v) accepted", cfg)
		}
	}
}

// An outage of a second: every request fails its first attempt; the
// breaker holds the retries, one probe at a time finds the host back, and
// the held retries are released. Without a budget all succeed with about
// two attempts each; with the default budget, the retries that leave the
// hold are charged, so no more go than the budget allows (10% of the
// 200 first attempts, or the floor of 30 in 3 s) and the rest give up
// with their 503. First attempts are never held.
func TestTransportBreakerBridgesBlip(t *testing.T) {
	for _, budget := range []bool{false, true} {
		bridgesBlip(t, budget)
	}
}

func bridgesBlip(t *testing.T, budget bool) {
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
		tr := New(base, WithoutBudget())
		if budget {
			tr = New(base)
		}
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
		switch {
		case !budget && ok.Load() != n:
			t.Errorf("%d of %d requests succeeded after a 1s outage, want all", ok.Load(), n)
		case !budget && attempts.Load() > 2*n+40:
			t.Errorf("%d attempts for %d requests, want about 2 each", attempts.Load(), n)
		case budget && (attempts.Load() > 2*n+1+15 || ok.Load() != n):
			// The host served no one: the retries waited for it, uncharged,
			// and its recovery lent them beyond the share.
			t.Errorf("default budget: %d attempts for %d requests, %d succeeded; want all to succeed, with at most one retry each (+15 probes: one at a time, 70ms apart at the closest)",
				attempts.Load(), n, ok.Load())
		}
	})
}

// A long outage is shed: a retry that nothing releases gives up within its
// own backoff schedule (2.8s with the defaults) with its last response.
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
		if d := time.Duration(slowest.Load()); d > 2800*time.Millisecond {
			t.Errorf("the slowest request failed after %v, want within its 2.8s schedule", d)
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

// With many retries held, a failed probe wakes one of them (the first in
// line), not all: a probe cycle costs O(1) allocations, however many are
// held.
func TestBreakerProbeCycleWakesOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestConfig(t, WithoutBudget(),
			WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(10 * time.Millisecond), MaxHold: time.Hour}))
		h := c.gate.hosts.get("h")
		trip(c, h)
		const held = 2000
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		probes := make(chan *call, held)
		var wg sync.WaitGroup
		for range held {
			wg.Add(1)
			go func() {
				defer wg.Done()
				limit := time.Now().Add(time.Hour)
				for {
					k := heldCall(c, ctx)
					reason, err := c.gate.hold(&k.t, time.Now(), limit)
					if err != nil || reason != "" || k.t.p.probe == 0 {
						return
					}
					probes <- k
				}
			}()
		}
		time.Sleep(20 * time.Millisecond)
		synctest.Wait()
		k := <-probes
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const cycles = 50
		for range cycles {
			c.gate.record(&k.t, &result{retryable: true}) // the probe failed
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			k = <-probes // the next one went
		}
		runtime.ReadMemStats(&after)
		if per := float64(after.Mallocs-before.Mallocs) / cycles; per > 50 {
			t.Errorf("%.0f allocations per probe cycle with %d retries held, want O(1)", per, held)
		}
		c.gate.record(&k.t, &result{})
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
			time.Sleep(2 * time.Millisecond)
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
