package admission

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The breaker through the Gate: what a Transport tells it of each
// attempt, and the holds it keeps, with no request and no server.

// share is a budget of ratio and floor.
func share(ratio, floor float64) *Share {
	s := new(Share)
	s.Init(ratio, floor)
	return s
}

// testGate is a Gate with budget b (nil: none) and breaker cfg, whose
// zero fields take the defaults of a 2.8 s schedule (newCircuit).
func testGate(b *Share, cfg Breaker) *Gate {
	return New(Settings{Budget: b, Breaker: newCircuit(cfg).cfg})
}

// The outcomes a test tells the Gate of.
var (
	failed   = Outcome{Failed: true}
	answered = Outcome{Answered: true}
)

// heldCall is a request to host "h" whose retry is about to be held.
func heldCall(g *Gate, ctx context.Context) *Ticket {
	return &Ticket{ctx: ctx, hs: g.hosts.get("h")}
}

// feed records attempts to hs as the pattern says (F: failed in a way
// worth retrying, S: answered), 2ms apart.
func feed(g *Gate, hs *hostState, pattern string) {
	k := &Ticket{hs: hs}
	for _, ch := range pattern {
		time.Sleep(2 * time.Millisecond)
		k.start = mono()
		o := answered
		if ch == 'F' {
			o = failed
		}
		g.record(k, o)
	}
}

func trip(g *Gate, h *hostState) { feed(g, h, strings.Repeat("F", g.breaker.Threshold)) }

// held runs a hold for a retry of host h with the given limit, and says
// how it ended: "probe", "released", "breaker", or the error.
func held(g *Gate, ctx context.Context, limit time.Time) string {
	s, _ := heldK(g, ctx, limit)
	return s
}

func heldK(g *Gate, ctx context.Context, limit time.Time) (string, *Ticket) {
	k := heldCall(g, ctx)
	return heldHow(g, k, limit), k
}

func heldHow(g *Gate, k *Ticket, limit time.Time) string {
	reason, err := g.hold(k, time.Now(), limit)
	switch {
	case err != nil:
		return err.Error()
	case reason != "":
		return string(reason)
	case k.p.probe != 0:
		return "probe"
	}
	return "released"
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
			g := testGate(share(0.1, 10), Breaker{})
			h := g.hosts.get("h")
			for range tt.repeat {
				for _, ch := range tt.pattern {
					if !h.circuit().isOpen.Load() {
						feed(g, h, string(ch))
					}
				}
			}
			if h.circuit().isOpen.Load() != tt.wantOpen {
				t.Errorf("%s: open = %v, want %v", tt.name, h.circuit().isOpen.Load(), tt.wantOpen)
			}
			if g.hosts.get("other").circuit().isOpen.Load() {
				t.Errorf("%s: another host's breaker opened too", tt.name)
			}
		})
	}
}

// Failures that all come in one instant open nothing: the host is failing
// only once its failures have lasted minFailingSpan.
func TestBreakerNeedsFailuresOverTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := testGate(share(0.1, 10), Breaker{})
		h := g.hosts.get("h")
		k := &Ticket{hs: h}
		for range 50 {
			g.record(k, failed)
		}
		if h.circuit().isOpen.Load() {
			t.Fatal("50 failures in one instant opened the breaker")
		}
		time.Sleep(minFailingSpan)
		g.record(k, failed)
		if !h.circuit().isOpen.Load() {
			t.Fatal("failures over 10ms did not open the breaker")
		}
	})
}

// While the breaker is open, one held retry at a time goes as the probe;
// when an attempt succeeds, the others go onto the ramp: one at once,
// more as the host answers them, and the rest by their paced turn (as long
// after the answer as they were due after the first of them) at the
// latest.
func TestBreakerProbeThenRamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := testGate(nil, Breaker{ProbeBackoff: constant(10 * time.Millisecond), MaxHold: time.Minute, ProbeTimeout: time.Hour})
		h := g.hosts.get("h")
		trip(g, h)
		ctx := context.Background()
		limit := time.Now().Add(time.Minute)

		// The first retry to come after the probe delay is the probe.
		if got := held(g, ctx, limit); got != "probe" {
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
				got <- release{i, held(g, ctx, limit), time.Since(start)}
			}()
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("%d retries passed while the probe was in flight", len(got))
		}
		feed(g, h, "S") // a first attempt is answered at 1.002s: one goes (the slow start)
		feed(g, h, "S") // another at 1.004s: none (a first attempt's answer frees no retry's place)
		wg.Wait()
		close(got)
		want := []time.Duration{1002, 1102, 1202, 1302, 1402} // ms: the others at their turns
		for r := range got {
			if w := want[r.i] * time.Millisecond; r.how != "released" || r.at != w {
				t.Errorf("held retry %d: %s at %v, want released at %v", r.i, r.how, r.at, w)
			}
		}
		if h.circuit().isOpen.Load() {
			t.Error("breaker still open after a success")
		}
	})
}

// A failed probe schedules the next one at ProbeBackoff after it; a first
// attempt that fails meanwhile pushes it back, so that traffic that keeps
// flowing needs no probes.
func TestBreakerFailedProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := testGate(nil, Breaker{ProbeBackoff: constant(50 * time.Millisecond), MaxHold: time.Minute})
		h := g.hosts.get("h")
		trip(g, h)
		ctx := context.Background()
		limit := time.Now().Add(time.Minute)
		start := time.Now()
		got, probe := heldK(g, ctx, limit)
		if got != "probe" || time.Since(start) != 50*time.Millisecond {
			t.Fatalf("probe %s after %v, want the probe 50ms after the breaker opened", got, time.Since(start))
		}
		probe.start = mono()
		g.record(probe, failed) // the probe failed
		go func() {
			time.Sleep(30 * time.Millisecond)
			feed(g, h, "F") // a first attempt failed at 32ms: the next probe waits 50ms from there
		}()
		start = time.Now()
		if got := held(g, ctx, limit); got != "probe" || time.Since(start) != 82*time.Millisecond {
			t.Errorf("next probe %s after %v, want the probe 50ms after the last failure", got, time.Since(start))
		}
	})
}

// Every retry that leaves a hold is charged to the budget: with none, no
// probe goes, and at its limit the retry gives up, reason budget, having
// sent nothing.
func TestBreakerProbeChargedToBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := testGate(share(0, 0), Breaker{ProbeBackoff: constant(10 * time.Millisecond)})
		trip(g, g.hosts.get("h"))
		start := time.Now()
		if got := held(g, context.Background(), time.Now().Add(time.Second)); got != "budget" || time.Since(start) != time.Second {
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
			g := testGate(nil, Breaker{ProbeBackoff: constant(time.Millisecond), ProbeTimeout: time.Hour})
			h := g.hosts.get("h")
			trip(g, h)
			if tt.retryFailed {
				k := &Ticket{g: g, hs: h, retry: true}
				g.record(k, failed)
			}
			if tt.hung {
				if got := held(g, context.Background(), time.Now().Add(time.Hour)); got != "probe" {
					t.Fatalf("first hold = %s, want the probe", got)
				}
			} else {
				h.circuit().mu.Lock()
				h.circuit().nextProbe = time.Now().Add(time.Hour)
				h.circuit().mu.Unlock()
			}
			go func() {
				time.Sleep(10 * time.Millisecond)
				k := &Ticket{g: g, hs: h, retry: tt.attempt > 1}
				g.record(k, failed) // sent while a retry is held
			}()
			start := time.Now()
			if got := held(g, context.Background(), time.Now().Add(30*time.Millisecond)); got != tt.want || time.Since(start) != 30*time.Millisecond {
				t.Errorf("hold past its limit, attempt %d failed meanwhile (a retry before: %v, hung probe: %v) = %s after %v, want %s after 30ms",
					tt.attempt, tt.retryFailed, tt.hung, got, time.Since(start), tt.want)
			}
		})
	}
	synctest.Test(t, func(t *testing.T) {
		g := testGate(share(0.1, 10), Breaker{ProbeBackoff: constant(time.Hour)})
		trip(g, g.hosts.get("h"))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		if got := held(g, ctx, time.Now().Add(time.Hour)); got != context.Canceled.Error() {
			t.Errorf("hold with its context cancelled = %s, want context.Canceled", got)
		}
	})
}

// With many retries held, a failed probe wakes one of them (the first in
// line), not all: a probe cycle costs O(1) allocations, however many are
// held.
func TestBreakerProbeCycleWakesOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := testGate(nil, Breaker{ProbeBackoff: constant(10 * time.Millisecond), MaxHold: time.Hour})
		h := g.hosts.get("h")
		trip(g, h)
		const held = 2000
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		probes := make(chan *Ticket, held)
		var wg sync.WaitGroup
		for range held {
			wg.Add(1)
			go func() {
				defer wg.Done()
				limit := time.Now().Add(time.Hour)
				for {
					k := heldCall(g, ctx)
					reason, err := g.hold(k, time.Now(), limit)
					if err != nil || reason != "" || k.p.probe == 0 {
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
			g.record(k, failed) // the probe failed
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			k = <-probes // the next one went
		}
		runtime.ReadMemStats(&after)
		if per := float64(after.Mallocs-before.Mallocs) / cycles; per > 50 {
			t.Errorf("%.0f allocations per probe cycle with %d retries held, want O(1)", per, held)
		}
		g.record(k, answered)
		cancel()
		wg.Wait()
	})
}

// pacerOf is hs's pacer of type T, or a zero one if it has none (with
// nothing in use or awaited).
func pacerOf[T any](hs *hostState) *T {
	for _, c := range hs.list() {
		if p, ok := any(c).(*T); ok {
			return p
		}
	}
	return new(T)
}

// FailFast refuses a first attempt to a host whose breaker is open at
// once, before the pacers: a slot of the limit held by a request to the
// failing host that hangs keeps it waiting for nothing.
func TestFailFastBeforeThePacers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Settings{Breaker: newCircuit(Breaker{FailFast: true, ProbeBackoff: constant(time.Hour)}).cfg, Limit: &Limit{Min: 1, Max: 1}})
		h := g.hosts.get("h")
		trip(g, h)
		l := pacerOf[limiter](h)
		l.mu.Lock()
		l.inflight = 1
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		began := time.Now()
		var tk Ticket
		if _, reason, err := tk.First(g, &Request{Ctx: ctx, Scheme: "http", Host: "h"}); time.Since(began) > 0 || reason != reasonCircuitOpen {
			t.Errorf("FailFast with the breaker open: %q, %v after %v, want circuit_open at once", reason, err, time.Since(began))
		}
	})
}

// The waits for a quota add up to maxWait at most, however many turns.
func TestQuotaWaitsAddUpToMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Settings{Quota: &Quota{MaxWait: 2 * time.Second}})
		q := pacerOf[quota](g.hosts.get("h"))
		now := mono()
		q.mu.Lock() // a small quota that others share: spent, 1.5 s windows
		q.parts = append(q.parts, quotaPart{key: "default", remaining: 0, reset: now + int64(1500*time.Millisecond),
			obs: now, window: int64(1500 * time.Millisecond), limit: 1, foreign: 1e-6})
		q.mu.Unlock()
		began := time.Now()
		var tk Ticket
		_, reason, err := tk.First(g, &Request{Ctx: context.Background(), Scheme: "http", Host: "h"})
		if took := time.Since(began); took > 2*time.Second+200*time.Millisecond {
			t.Errorf("quota pacing, maxWait 2s: waited %v, then %q, %v", took, reason, err)
		}
	})
}
