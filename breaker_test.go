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

	"github.com/retryhttp/retryhttp/internal/admission"
	"github.com/retryhttp/retryhttp/retrytest"
)

// hostOf is host h's admission, as it stands.
func hostOf(tr *Transport, h string) admission.View { return tr.c.gate.View(h) }

// trip opens host h's breaker: as many failures as its threshold, 2ms
// apart, told to the gate as the Transport tells it.
func trip(tr *Transport, h string) {
	for range resolveBreaker(*tr.c.breaker, tr.c.schedule).Threshold {
		time.Sleep(2 * time.Millisecond)
		var t admission.Ticket
		t.First(tr.c.gate, &admission.Request{Ctx: context.Background(), Scheme: "http", Host: h})
		t.Done(&admission.Outcome{Failed: true})
	}
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
		if hostOf(tr, "h").Open {
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
			return respond(503), nil
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
		if hostOf(tr, "h").Probing {
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
		base := newFailing()
		attempts := &base.attempts
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
		base.down.Store(false)
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
		base := newFailing()
		attempts := &base.attempts
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

// A held retry due as the probe with less time left before its deadline
// than the host takes to answer (50ms) is not sent: it returns the 503
// it holds, reason breaker, at once, where the probe's answer would have
// come past the deadline and its caller got the deadline's error. With
// more time left, it goes as the probe.
func TestBreakerProbeLeavesTimeToAnswer(t *testing.T) {
	for _, tt := range []struct {
		deadline time.Duration // from the request's start; the probe is due at 150ms
		attempts int
		took     time.Duration
	}{
		{170 * time.Millisecond, 1, 150 * time.Millisecond}, // 20ms left at the probe time
		{300 * time.Millisecond, 2, 200 * time.Millisecond}, // 150ms left: the probe goes, and is answered 503
	} {
		synctest.Test(t, func(t *testing.T) {
			var attempts atomic.Int32
			base := retrytest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
				attempts.Add(1)
				select {
				case <-time.After(50 * time.Millisecond):
					return reply(r, 503, nil), nil
				case <-r.Context().Done():
					return nil, r.Context().Err()
				}
			})
			var reason GiveUpReason
			tr := New(base, WithBackoff(Constant(0)), WithMaxAttempts(2), WithoutBudget(),
				WithRetryBreaker(BreakerConfig{ProbeBackoff: Constant(100 * time.Millisecond), MaxHold: time.Second}),
				WithAttemptHook(func(ctx context.Context, _ AttemptStart) (context.Context, func(AttemptEnd)) {
					return ctx, func(e AttemptEnd) { reason = e.GiveUp }
				}))
			trip(tr, "h") // open; the first attempt's 503 at 50ms puts the probe at 150ms
			start := time.Now()
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/", nil).WithContext(shortCtx(t, tt.deadline)))
			if err != nil {
				t.Fatalf("deadline %v: %v; want the 503", tt.deadline, err)
			}
			resp.Body.Close()
			want := GiveUpBreaker
			if tt.attempts == 2 {
				want = GiveUpAttempts
			}
			if n, took := int(attempts.Load()), time.Since(start); resp.StatusCode != 503 || n != tt.attempts || took != tt.took || reason != want {
				t.Errorf("deadline %v: %d after %d attempts, %v, reason %q; want 503 after %d, %v, %q",
					tt.deadline, resp.StatusCode, n, took, reason, tt.attempts, tt.took, want)
			}
		})
	}
}

// A status by which the host turns requests away (429, 502, 503, 504) is a
// failure of the host even when the caller does not retry it: here 503,
// made final by WithNonRetryableStatuses, while the host is down. Its 503s
// do not count as the host's answers: they neither close the breaker that
// the 502s opened nor release the 502s' held retries into the outage.
func TestFinalRefusalIsNoAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newFailing()
		var held atomic.Int64 // attempts to /held, the requests whose retries are held
		base.fail = func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/held" {
				held.Add(1)
				return reply(r, 502, nil), nil
			}
			return reply(r, 503, nil), nil
		}
		tr := New(base, WithNonRetryableStatuses(503))
		const n = 40
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/held", nil)); err == nil {
					resp.Body.Close()
				}
			})
		}
		for range 20 { // the final 503s of other requests, while the retries are held
			time.Sleep(50 * time.Millisecond)
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://h/final", nil))
			if err != nil || resp.StatusCode != 503 {
				t.Fatalf("RoundTrip = %v, %v; want its one 503", resp, err)
			}
			resp.Body.Close()
		}
		if got := held.Load(); got > n+10 {
			t.Errorf("%d attempts for %d requests held in an outage: the final 503s released their retries", got, n)
		}
		if !hostOf(tr, "h").Open {
			t.Error("the breaker closed on 503s while the host was down")
		}
		base.down.Store(false)
		wg.Wait()
	})
}
