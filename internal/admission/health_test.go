package admission

import (
	"testing"
	"time"
)

// The one rule that tells an outage (the host serves no one) from an
// overload (it serves some and refuses the rest), in virtual time: each
// case is a script of answers ("S") and failures ("F") at given times, and
// what the host is at the end of it.
func TestHealthOutageOrOverload(t *testing.T) {
	type event struct {
		at time.Duration
		ok bool
	}
	// every returns n events of kind ok, gap apart, from start.
	every := func(start, gap time.Duration, n int, ok bool) []event {
		var es []event
		for i := range n {
			es = append(es, event{start + time.Duration(i)*gap, ok})
		}
		return es
	}
	cat := func(parts ...[]event) []event {
		var es []event
		for _, p := range parts {
			es = append(es, p...)
		}
		return es
	}
	// deep is an overload where one attempt in 20 is served, 10 a second.
	var deep []event
	for i := range 200 {
		deep = append(deep, event{time.Duration(i) * 5 * time.Millisecond, i%20 == 0})
	}
	const ms = time.Millisecond
	for _, tc := range []struct {
		name         string
		events       []event
		at           time.Duration // when the host is asked about
		down, outage bool
	}{
		{"cold host, four failures in one instant: may be down, not yet an outage",
			every(0, 0, 4, false), 0, true, false},
		{"cold host, four failures, 10ms on: an outage",
			every(0, 0, 4, false), 10 * ms, true, true},
		{"cold host, three failures: not enough to tell",
			every(0, 0, 3, false), time.Second, false, false},
		{"busy host (an answer every 5ms) failing for 50ms: not quiet yet",
			cat(every(0, 5*ms, 200, true), every(time.Second, 5*ms, 10, false)), time.Second + 50*ms, false, false},
		{"busy host failing for 150ms: quiet past 100ms, an outage",
			cat(every(0, 5*ms, 200, true), every(time.Second, 5*ms, 30, false)), time.Second + 150*ms, true, true},
		{"quiet host (an answer a second) failing for 2s: not yet past 4 gaps",
			cat(every(0, time.Second, 5, true), every(5*time.Second, 100*ms, 20, false)), 7 * time.Second, false, false},
		{"quiet host failing for 5s: past 4 of its gaps, an outage",
			cat(every(0, time.Second, 5, true), every(5*time.Second, 100*ms, 50, false)), 9*time.Second + 100*ms, true, true},
		{"deep overload (1 in 20 served, 10 a second): never an outage",
			deep, 995 * ms, false, false},
		{"half served: the score stays low, no outage",
			cat(every(0, 2*ms, 100, true), every(ms, 2*ms, 100, false)), 200 * ms, false, false},
		{"an answer after the failures: the last word was an answer",
			cat(every(0, 0, 10, false), every(50*ms, 0, 1, true)), 60 * ms, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h health
			base := int64(time.Hour) // mono is never 0
			for _, e := range tc.events {
				m := base + int64(e.at)
				if e.ok {
					h.answer(m, m)
				} else {
					h.fail(m, failingAfter*3)
				}
			}
			m := base + int64(tc.at)
			if got := h.down(m); got != tc.down {
				t.Errorf("down = %v, want %v", got, tc.down)
			}
			if got := h.outage(m); got != tc.outage {
				t.Errorf("outage = %v, want %v", got, tc.outage)
			}
		})
	}
}

// The usual gap between answers is learnt as they come, and an outage's
// silence does not teach it: after a 10s outage, a host that answered
// every 10ms is again taken for down within 100ms of failing.
func TestHealthGapIgnoresOutages(t *testing.T) {
	var h health
	m := int64(time.Hour)
	for range 100 {
		m += int64(10 * time.Millisecond)
		h.answer(m, m)
	}
	if g := time.Duration(h.gapNS()); g != 10*time.Millisecond {
		t.Fatalf("gap = %v, want 10ms", g)
	}
	m += int64(10 * time.Second)
	h.answer(m, m) // the first answer after a 10s outage
	if g := time.Duration(h.gapNS()); g > 13*time.Millisecond {
		t.Errorf("gap after an outage = %v, want at most 13ms (one gap counts at most twice the average, an eighth of it)", g)
	}
	for range 5 {
		m += int64(time.Millisecond)
		h.fail(m, 12)
	}
	if m += int64(101 * time.Millisecond); !h.outage(m) {
		t.Error("a host that answered every 10ms, failing for 100ms, is not taken for down")
	}
}

// A failing host that has answered nothing since its failures began, for
// longer than its usual gap, may be in an outage not yet sure (a quiet
// client's host, long before it is quiet for 4 gaps); an overload, whose
// answers come among its refusals, never is.
func TestHealthUnanswered(t *testing.T) {
	const ms = int64(time.Millisecond)
	base := int64(time.Hour) // mono is never 0
	var quiet health         // an answer every 500ms, then failures from 5s
	for i := range int64(10) {
		quiet.answer(base+i*500*ms, base+i*500*ms)
	}
	for i := range int64(6) {
		quiet.fail(base+5000*ms+i*100*ms, failingAfter*3)
	}
	if m := base + 5600*ms; !quiet.unanswered(m) || quiet.down(m) {
		t.Errorf("a host that answered every 500ms, failing in a row for 600ms: unanswered %v, down %v; want true, false",
			quiet.unanswered(m), quiet.down(m))
	}
	var deep health // 1 in 20 served, 10 a second
	for i := range int64(200) {
		if m := base + i*5*ms; i%20 == 0 {
			deep.answer(m, m)
		} else {
			deep.fail(m, failingAfter*3)
		}
	}
	if m := base + 995*ms; deep.unanswered(m) {
		t.Error("a deep overload (1 in 20 served, 10 a second) taken for unanswered")
	}
	var once health // one answer, then failures in a row for less than 100ms
	once.answer(base, base)
	for i := int64(1); i < 19; i++ {
		once.fail(base+i*5*ms, failingAfter*3)
	}
	if m := base + 95*ms; once.unanswered(m) {
		t.Error("a host that answered once, failing for 95ms, taken for unanswered: at least 100ms")
	}
}
