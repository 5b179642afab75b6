package retryhttp

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retrytest"
)

func newTestBreaker(cfg BreakerConfig) *breaker {
	c := &config{}
	if err := WithRetryBreaker(cfg).apply(c); err != nil {
		panic(err)
	}
	return c.breaker
}

func TestBreakerTripsOnFirstAttemptsOnly(t *testing.T) {
	now := time.Now()
	b := newTestBreaker(BreakerConfig{Threshold: 10})
	for range 100 {
		b.record("h", false, true, now) // retries failing: one request alone
	}
	if b.isOpen("h") {
		t.Fatal("retries' failures tripped the breaker")
	}
	for i := range 10 {
		if b.isOpen("h") {
			t.Fatalf("open after %d failed first attempts, want 10", i)
		}
		b.record("h", true, true, now)
	}
	if !b.isOpen("h") {
		t.Fatal("closed after 10 failed first attempts")
	}
	if b.isOpen("other") {
		t.Error("another host's breaker opened too")
	}
}

func TestBreakerScore(t *testing.T) {
	tests := []struct {
		name     string
		pattern  string // F: failed first attempt, S: success
		repeat   int
		wantOpen bool
	}{
		{"all fail", "F", 10, true},
		{"two in three fail: never", "FFS", 100, false},
		{"three in four fail", "FFFS", 10, true},
		{"half fail", "FS", 100, false},
		{"successes drain the score", "FFFFFFFFFSSSSS", 1, false},
	}
	for _, tt := range tests {
		b := newTestBreaker(BreakerConfig{Threshold: 10})
		for range tt.repeat {
			for _, c := range tt.pattern {
				if !b.isOpen("h") {
					b.record("h", true, c == 'F', time.Now())
				}
			}
		}
		if b.isOpen("h") != tt.wantOpen {
			t.Errorf("%s: open = %v, want %v", tt.name, b.isOpen("h"), tt.wantOpen)
		}
	}
}

func TestBreakerProbeThenRelease(t *testing.T) {
	b := newTestBreaker(BreakerConfig{Threshold: 1, ProbeBackoff: Constant(10 * time.Millisecond)})
	b.record("h", true, true, time.Now())
	if !b.isOpen("h") {
		t.Fatal("not open")
	}
	cl := realClock{}
	limit := time.Now().Add(5 * time.Second)
	ctx := context.Background()

	// The first retry to come after the probe delay is the probe.
	mode, err := b.hold(ctx, "h", cl, limit, false)
	if mode != sendProbe || err != nil {
		t.Fatalf("first hold = %v, %v; want the probe", mode, err)
	}
	// While it is in flight, the others wait.
	const waiters = 20
	modes := make(chan holdMode, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := b.hold(ctx, "h", cl, limit, false)
			if err != nil {
				t.Error(err)
			}
			modes <- m
		}()
	}
	time.Sleep(30 * time.Millisecond)
	if len(modes) != 0 {
		t.Fatalf("%d retries passed while the probe was in flight", len(modes))
	}
	// The probe fails: one waiter becomes the next probe, 10ms later.
	b.probeFailed("h", time.Now())
	select {
	case m := <-modes:
		if m != sendProbe {
			t.Fatalf("after a failed probe a waiter got %v, want the next probe", m)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no next probe after a failed one")
	}
	// It succeeds: the breaker closes and every other waiter is released.
	b.record("h", false, false, time.Now())
	wg.Wait()
	close(modes)
	n := 0
	for m := range modes {
		if m != sendReleased {
			t.Errorf("waiter got %v, want released", m)
		}
		n++
	}
	if n != waiters-1 || b.isOpen("h") {
		t.Errorf("%d released, open %v; want %d, closed", n, b.isOpen("h"), waiters-1)
	}
	if m, err := b.hold(ctx, "h", cl, limit, false); m != sendNow || err != nil {
		t.Errorf("closed breaker: hold = %v, %v; want sendNow", m, err)
	}
}

func TestBreakerHoldBounded(t *testing.T) {
	b := newTestBreaker(BreakerConfig{Threshold: 1, ProbeBackoff: Constant(time.Hour)})
	b.record("h", true, true, time.Now())
	start := time.Now()
	if _, err := b.hold(context.Background(), "h", realClock{}, time.Now().Add(30*time.Millisecond), false); !errors.Is(err, ErrBreakerHold) {
		t.Errorf("hold past its limit = %v, want ErrBreakerHold", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := b.hold(ctx, "h", realClock{}, time.Now().Add(time.Hour), false); !errors.Is(err, context.Canceled) {
		t.Errorf("hold with its context cancelled = %v, want context.Canceled", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("holds took %v", time.Since(start))
	}
}

func TestBreakerInvalidConfig(t *testing.T) {
	for _, cfg := range []BreakerConfig{{Threshold: -1}, {ReleaseSpread: -1}, {MaxHold: -1}} {
		if err := WithRetryBreaker(cfg).apply(&config{}); err == nil {
			t.Errorf("WithRetryBreaker(%+v) accepted", cfg)
		}
	}
}

// An outage: every request fails its first attempt; with the breaker, the
// retries are held and released once the server is back, so all succeed
// with about two attempts each, and first attempts are never held.
func TestTransportBreakerBurst(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var attempts atomic.Int64
	srv := retrytest.NewServer()
	srv.Handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	tr := New(nil, WithBackoff(Constant(5*time.Millisecond)), WithMaxAttempts(3),
		WithRetryBreaker(BreakerConfig{Threshold: 5, ProbeBackoff: Constant(20 * time.Millisecond), ReleaseSpread: 20 * time.Millisecond}))
	defer tr.CloseIdleConnections()
	const n = 50
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := tr.RoundTrip(newRequest(t, "GET", srv.URL, nil))
			if err == nil {
				if resp.StatusCode == 200 {
					ok.Add(1)
				}
				resp.Body.Close()
			}
		}()
	}
	time.Sleep(150 * time.Millisecond)
	if got := attempts.Load(); got > n+20 {
		t.Errorf("%d attempts during the outage for %d requests: retries were not held", got, n)
	}
	// A first attempt is never held, even while the breaker is open.
	before := attempts.Load()
	resp, err := tr.RoundTrip(newRequest(t, "GET", srv.URL, nil).WithContext(shortCtx(t, 3*time.Millisecond)))
	if err == nil {
		resp.Body.Close()
	}
	if attempts.Load() == before {
		t.Error("a first attempt was held by the open breaker")
	}
	down.Store(false)
	wg.Wait()
	if ok.Load() != n {
		t.Errorf("%d of %d requests succeeded after the outage, want all", ok.Load(), n)
	}
	if got := attempts.Load(); got > 2*n+25 {
		t.Errorf("%d attempts for %d requests, want about 2 each", got, n)
	}
}

func shortCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
