// This file holds the storm engine's tests: each shape of scenario run
// for a moment on loopback, without retries (and once with retryhttp),
// its figures checked against what the shape must give.

package main

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

// The engine counts what the server receives: a contender that never
// retries sends exactly one attempt per request, and none succeeds while
// the server is down.
func TestStormAccounting(t *testing.T) {
	sc := Scenario{Name: "smoke", Shape: "burst", N: 100, Outage: 300 * time.Millisecond,
		Capacity: 50, Work: time.Millisecond, Timeout: 10 * time.Second}
	r, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	if r.Attempts != 100 || r.Successes != 0 || r.Requests != 100 || r.OutageAttempts != 100 {
		t.Errorf("bare: %+v; want 100 attempts in the outage, no success", r)
	}
	// The host served no one: retryhttp holds the retries through the
	// outage and releases them when it is back, each request retried
	// about once (and a few probes).
	r, err = Run(sc, bench.RetryHTTP)
	if err != nil {
		t.Fatal(err)
	}
	if r.Attempts > 2*100+10 || r.Successes < 99 {
		t.Errorf("retryhttp: %d attempts, %d of 100 succeeded; want at most 210, and all (but one) to succeed", r.Attempts, r.Successes)
	}
}

// A closed loop: each worker sends its next request when the last ends;
// the server counts what it served, and when it first served after the
// outage.
func TestClosedShape(t *testing.T) {
	sc := Scenario{Name: "smoke-closed", Shape: "closed", Workers: 4, Warmup: 200 * time.Millisecond,
		Outage: 200 * time.Millisecond, Recovery: 200 * time.Millisecond, Capacity: 50, Work: time.Millisecond, Timeout: 10 * time.Second}
	r, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests < 40 || r.Served != int64(r.Successes) || r.FirstOK < 0 || r.FirstOK > 50*time.Millisecond || r.OKAfter2s == 0 {
		t.Errorf("bare closed loop: %d requests, %d served, %d ok, first ok %v after, %d in 2 s after", r.Requests, r.Served, r.Successes, r.FirstOK, r.OKAfter2s)
	}
}

// An overloaded server serves its capacity and refuses the rest: with no
// retries, it receives the offered load.
func TestOverloadShape(t *testing.T) {
	sc := Scenario{Name: "smoke-overload", Shape: "steady", RateCap: 100, Rate: 200, Warmup: time.Second, Timeout: 10 * time.Second}
	r, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	arr, good, _ := r.Load(sc)
	if r.Requests != 200 || arr != 2 || good < 0.8 || good > 1.1 {
		t.Errorf("bare at 2x: %d requests, arrivals %.2f× capacity, goodput %.2f; want 200, 2×, about 1", r.Requests, arr, good)
	}
}

// A server of few slots offered random arrivals below its capacity
// refuses some of them (bursts find every slot busy); evenly spaced, it
// refuses none.
func TestSlotsShape(t *testing.T) {
	sc := Scenario{Name: "smoke-slots", Shape: "steady", Slots: 2, Work: 20 * time.Millisecond, Rate: 50,
		Warmup: 2 * time.Second, Timeout: 10 * time.Second}
	even, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	sc.Poisson = true
	random, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	if even.Requests != 100 || random.Requests != 100 || random.Successes >= even.Successes || random.Successes < 50 {
		t.Errorf("0.5 of capacity: %d of %d served evenly spaced, %d of %d at random; want all, and fewer but most at random",
			even.Successes, even.Requests, random.Successes, random.Requests)
	}
}

func TestSteadyShape(t *testing.T) {
	sc := Scenario{Name: "smoke-steady", Shape: "steady", Rate: 100, Warmup: 300 * time.Millisecond,
		Outage: 200 * time.Millisecond, Recovery: 300 * time.Millisecond, Capacity: 50, Work: time.Millisecond, Timeout: 10 * time.Second}
	r, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 80 || r.OutageRequests < 15 || r.OutageRequests > 25 || r.Successes != r.Requests-r.OutageRequests {
		t.Errorf("bare steady: %d requests, %d in the outage, %d ok; want 80, about 20, the rest", r.Requests, r.OutageRequests, r.Successes)
	}
}

func TestRetryAfterSpread(t *testing.T) {
	if got := retryAfter("3"); got != "3" {
		t.Errorf(`retryAfter("3") = %q`, got)
	}
	seen := map[string]bool{}
	for range 1000 {
		v := retryAfter("3-6")
		if v != "3" && v != "4" && v != "5" && v != "6" {
			t.Fatalf(`retryAfter("3-6") = %q, want a whole number in [3, 6]`, v)
		}
		seen[v] = true
	}
	if len(seen) != 4 {
		t.Errorf(`retryAfter("3-6") gave only %v in 1000 draws`, seen)
	}
}

// A server whose capacity steps serves at most its capacity at once, and
// the engine tells each phase's goodput apart.
func TestStepsShape(t *testing.T) {
	sc := Scenario{Name: "smoke-steps", Shape: "steady", Rate: 400, Warmup: 6 * time.Second, Work: 20 * time.Millisecond,
		Capacity: 4, Steps: []Step{{0, 4}, {3 * time.Second, 2}}, Timeout: 10 * time.Second}
	r, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Phases) != 2 {
		t.Fatalf("%d phases, want 2", len(r.Phases))
	}
	for i, ph := range r.Phases {
		// Offered 400 a second, 4 or 2 at once for 20 ms serve 200 or 100.
		if ph.Goodput < 0.7 || ph.Goodput > 1.05 || ph.P99 < sc.Work || ph.P99 > 3*sc.Work {
			t.Errorf("phase %d (capacity %d): goodput %.2f × capacity, p99 %v; want about 1, between 1 and 2 × %v", i, ph.Capacity, ph.Goodput, ph.P99, sc.Work)
		}
	}
}

// A server with a quota serves it per window and answers 429 beyond: with
// no retries, offered 3 × the quota, it serves a third.
func TestQuotaShape(t *testing.T) {
	sc := Scenario{Name: "smoke-quota", Shape: "steady", Rate: 30, Warmup: 2 * time.Second, Quota: 10, QuotaWindow: time.Second,
		Timeout: 10 * time.Second}
	r, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	if r.Successes != 20 || r.TooMany != 40 || r.QuotaUsed != 1 {
		t.Errorf("bare: %d served, %d answered 429, quota used %.2f; want 20, 40, 1", r.Successes, r.TooMany, r.QuotaUsed)
	}
}

// A flapping server is down and up in turn; an outage served as refused
// connections counts each refused dial as an attempt.
func TestFlapAndRefuseShapes(t *testing.T) {
	sc := Scenario{Name: "smoke-flap", Shape: "steady", Rate: 100, Warmup: 200 * time.Millisecond,
		Outage: 800 * time.Millisecond, Flap: 200 * time.Millisecond, Capacity: 50, Work: time.Millisecond, Timeout: 10 * time.Second}
	r, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	// Down in [200, 400) and [600, 800) ms: about 40 of the 100 requests.
	if r.Requests != 100 || r.OutageRequests < 35 || r.OutageRequests > 45 || r.OutageSuccess != 0 || r.Successes != r.Requests-r.OutageRequests {
		t.Errorf("bare, flapping: %d requests, %d in the down spells (%d ok), %d ok in all; want 100, about 40 (none ok), the rest ok",
			r.Requests, r.OutageRequests, r.OutageSuccess, r.Successes)
	}
	sc = Scenario{Name: "smoke-refused", Shape: "steady", Rate: 100, Warmup: 300 * time.Millisecond,
		Outage: 300 * time.Millisecond, Recovery: 300 * time.Millisecond, Refuse: true, Capacity: 50, Work: time.Millisecond, Timeout: 10 * time.Second}
	r, err = Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 90 || r.OutageRequests < 28 || r.OutageSuccess != 0 || r.OutageAttempts < int64(r.OutageRequests)-2 || r.Successes < 55 {
		t.Errorf("bare, refused: %d requests, %d in the outage (%d ok), %d attempts in it, %d ok in all; want 90, about 30 refused and counted, the rest ok",
			r.Requests, r.OutageRequests, r.OutageSuccess, r.OutageAttempts, r.Successes)
	}
}

// recovery-weak's server comes back serving 1.5 × the offered rate: with
// no retries, every request started after the outage is served and none
// is shed, none started in it is; offered twice what it serves after the
// outage (and served in full before it), it sheds about half.
func TestRecoveryWeakShape(t *testing.T) {
	base := Scenario{Rate: 100, Warmup: 300 * time.Millisecond, Recovery: 600 * time.Millisecond, Capacity: 50,
		Work: time.Millisecond, Timeout: 10 * time.Second}
	sc := recoveryWeak(base)
	if sc.Name != "recovery-weak" || sc.Instances != 50 || sc.WeakRate != 150 || sc.Outage != 30*time.Second {
		t.Fatalf("recoveryWeak: %+v; want fleet-D30-K50's shape, served at 150 a second after the outage", sc)
	}
	sc.Outage = 300 * time.Millisecond
	r, err := Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	// Down in [300, 600) ms: about 30 of the 120 requests; 60 after it.
	if r.Requests != 120 || r.OutageRequests < 27 || r.OutageRequests > 33 || r.OutageSuccess != 0 ||
		r.Successes != r.Requests-r.OutageRequests || r.ShedAfter != 0 || r.AfterRequests < 55 || r.AfterSuccess != r.AfterRequests {
		t.Errorf("bare, recovery-weak: %d requests, %d in the outage (%d ok), %d ok in all, %d of %d ok after it, %d shed; want 120, about 30 (none ok), the rest ok, none shed",
			r.Requests, r.OutageRequests, r.OutageSuccess, r.Successes, r.AfterSuccess, r.AfterRequests, r.ShedAfter)
	}
	sc.WeakRate = sc.Rate / 2
	r, err = Run(sc, bench.Bare)
	if err != nil {
		t.Fatal(err)
	}
	before := r.Requests - r.OutageRequests - r.AfterRequests
	if r.ShedAfter < 20 || r.ShedAfter > 40 || r.Successes < before+20 || int64(r.Successes) != int64(r.Requests-r.OutageRequests)-r.ShedAfter {
		t.Errorf("bare, served at half the offered rate after the outage: %d shed, %d ok of %d (%d before the outage); want about 30 of the 60 after it shed, the rest ok",
			r.ShedAfter, r.Successes, r.Requests, before)
	}
}

// tagCounter is a contender that sends each request once, as bare does,
// and counts the requests it was told were critical or sheddable.
type tagCounter struct{ critical, sheddable atomic.Int64 }

type tagKey struct{}

func (tc *tagCounter) contender() bench.Contender {
	return bench.Contender{Name: "tag-counter",
		New: func(base http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				switch req.Context().Value(tagKey{}) {
				case true:
					tc.critical.Add(1)
				case false:
					tc.sheddable.Add(1)
				}
				return base.RoundTrip(req)
			})
		},
		Tag: func(ctx context.Context, critical bool) context.Context {
			return context.WithValue(ctx, tagKey{}, critical)
		},
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A mixed scenario's criticality is drawn per request index, the same for
// every contender: the run counts the critical and sheddable requests
// drawn, and their successes; each request is one or the other, tagged so;
// and with no critical share, none is tagged or counted.
func TestMixedCriticality(t *testing.T) {
	for _, m := range []struct {
		sc    Scenario
		name  string
		rate  int
		share float64
	}{{mixed(Scenario{}, 2, 0.3), "overload-2x-mixed", 1000, 0.3}, {mixed(Scenario{}, 4, 0.2), "overload-4x-mixed", 2000, 0.2}} {
		if m.sc.Name != m.name || m.sc.RateCap != 500 || m.sc.Rate != m.rate || m.sc.Warmup != 10*time.Second || m.sc.Critical != m.share {
			t.Errorf("%s: %+v; want overload's shape, %d req/s offered, %.0f%% critical", m.name, m.sc, m.rate, 100*m.share)
		}
	}
	drawn := 0
	for i := range 100_000 {
		if (Scenario{Critical: 0.3}).classOf(i) == critical {
			drawn++
		}
	}
	if drawn < 29_500 || drawn > 30_500 {
		t.Errorf("%d of 100000 drawn critical at a share of 0.3; want about 30000", drawn)
	}
	// Offered twice what the server serves: about half succeed.
	sc := Scenario{Name: "smoke-mixed", Shape: "steady", RateCap: 200, Rate: 400, Warmup: 500 * time.Millisecond,
		Timeout: 10 * time.Second, Critical: 0.3}
	want := 0
	for i := range 200 {
		if sc.classOf(i) == critical {
			want++
		}
	}
	if want < 45 || want > 75 {
		t.Fatalf("%d of 200 drawn critical at a share of 0.3; want about 60", want)
	}
	tc := &tagCounter{}
	r, err := Run(sc, tc.contender())
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 200 || r.CriticalRequests != want || r.SheddableRequests != 200-want ||
		tc.critical.Load() != int64(want) || tc.sheddable.Load() != int64(200-want) {
		t.Errorf("%d requests, %d critical, %d sheddable, tagged %d and %d; want 200, %d, %d, tagged so",
			r.Requests, r.CriticalRequests, r.SheddableRequests, tc.critical.Load(), tc.sheddable.Load(), want, 200-want)
	}
	if r.CriticalSuccesses+r.SheddableSuccesses != r.Successes || r.Successes < 60 || r.Successes > 150 ||
		r.CriticalSuccesses > r.CriticalRequests || r.SheddableSuccesses > r.SheddableRequests {
		t.Errorf("%d ok: %d critical, %d sheddable; want about half of 200, split between the two", r.Successes, r.CriticalSuccesses, r.SheddableSuccesses)
	}
	sc.Critical = 0
	tc = &tagCounter{}
	r, err = Run(sc, tc.contender())
	if err != nil {
		t.Fatal(err)
	}
	if tc.critical.Load()+tc.sheddable.Load() != 0 || r.CriticalRequests+r.SheddableRequests+r.CriticalSuccesses+r.SheddableSuccesses != 0 {
		t.Errorf("no critical share: %d and %d tagged, %+v counted; want none", tc.critical.Load(), tc.sheddable.Load(), r)
	}
}
