package admission

import (
	"testing"
	"time"
)

// slowedCircuit holds n retries on a tripped circuit, answers the probe
// at 10ms (a recovery from an outage), answers a first attempt, and then
// tells it that the released retry was turned away at 12ms.
func slowedCircuit(t *testing.T, n int) (*circuit, []*holder) {
	t.Helper()
	cb := newCircuit(Breaker{ProbeBackoff: constant(time.Hour), Schedule: 2800 * time.Millisecond})
	cbFail(cb, 0, false, true)
	var ws []*holder
	for i := range n {
		ws = append(ws, cb.enter(&holder{failed: tAt(-i), notBefore: tAt(-i), limit: tAt(2000 + i)}, tAt(-i)))
	}
	cbOK(cb, 10, true, true)
	if !cb.lends() {
		t.Fatal("the recovery from an outage lends nothing")
	}
	cbOK(cb, 11, false, false)
	cbFail(cb, 12, true, false)
	return cb, ws
}

// step turns every held retry at ms and counts how their holds ended.
func step(cb *circuit, ws []*holder, ms int) map[holdEnd]int {
	ends := map[holdEnd]int{}
	for _, w := range ws {
		if w.state == holdGone {
			continue
		}
		if end, _, done, _, _ := cb.turn(w, tAt(ms)); done {
			ends[end]++
		}
	}
	return ends
}

// A host that comes back weaker than before turns the released retries
// away: the recovery slows. It lends no more, lets no retry go at its
// paced turn, lets one go per slowShare first attempts answered, and a
// held retry at its limit gives up, though the host answers.
func TestRecoverySlowsWhenTheHostTurnsRetriesAway(t *testing.T) {
	cb, ws := slowedCircuit(t, 20)
	if !cb.slow.Load() {
		t.Fatal("a recovery whose released retry was turned away while the host answered first attempts did not slow")
	}
	if cb.lends() {
		t.Error("a slowed recovery still lends beyond the budget's share")
	}
	if ends := step(cb, ws, 12); len(ends) != 0 {
		t.Fatalf("after the refusal, %v ended; want none (the one let go and not yet gone is held again)", ends)
	}
	if ends := step(cb, ws, 1500); len(ends) != 0 {
		t.Errorf("with no answers, %v ended; want none (no paced turns once slowed)", ends)
	}
	for i := range 2 * slowShare {
		cbOK(cb, 1500+i, false, false)
	}
	if ends := step(cb, ws, 1600); ends[holdReleased] != 2 {
		t.Errorf("%d first attempts answered let %d go, want 2", 2*slowShare, ends[holdReleased])
	}
	if ends := step(cb, ws, 2100); ends[holdGiveUp] == 0 || ends[holdGo] != 0 {
		t.Errorf("at their limits: %v; want every one to give up, none to go", ends)
	}
}

// A recovery in which the host turns away fewer than a fifth of the
// released retries is only halted by each failure: it does not slow, and
// its paced turns go on.
func TestRecoveryDoesNotSlowForAFewRefusals(t *testing.T) {
	cb := newCircuit(Breaker{ProbeBackoff: constant(time.Hour), Schedule: 2800 * time.Millisecond})
	cbFail(cb, 0, false, true)
	for i := range 20 {
		cb.enter(&holder{failed: tAt(-i), notBefore: tAt(-i), limit: tAt(2000 + i)}, tAt(-i))
	}
	cbOK(cb, 10, true, true)
	cbOK(cb, 11, false, false)
	for i := range 8 {
		cbOK(cb, 12+i, true, false)
	}
	cbFail(cb, 30, true, false)
	if cb.slow.Load() {
		t.Error("one refusal in nine released retries slowed the recovery")
	}
	cbFail(cb, 31, true, false)
	cbFail(cb, 32, true, false)
	if !cb.slow.Load() {
		t.Error("three refusals in eleven did not slow it")
	}
}

// A slowed recovery ends once nothing is held and its span (the breaker's
// Schedule) has passed: the host's next answer starts afresh, and a
// retry to it is sent, not held.
func TestSlowedRecoveryEnds(t *testing.T) {
	cb, ws := slowedCircuit(t, 3)
	for _, w := range ws {
		cb.quit(w, tAt(100))
	}
	cbOK(cb, 2000, false, false)
	if !cb.slow.Load() {
		t.Fatal("a slowed recovery ended before its span")
	}
	cbOK(cb, 2900, false, false)
	if cb.slow.Load() {
		t.Error("a slowed recovery outlived its span with nothing held")
	}
}

// A slowed recovery stays slowed through the refusals of a host that
// still answers (weak), whether they open the breaker or not, but an
// outage ends it: the next answer, from a host that served no one (a
// flapping host, down again), begins a new recovery, which releases at
// the pace of its answers, not one per slowShare first attempts.
func TestOutageEndsASlowedRecovery(t *testing.T) {
	for _, outage := range []bool{false, true} {
		for _, open := range []bool{false, true} {
			cb, _ := slowedCircuit(t, 20)
			cbFail(cb, 20, false, open) // the breaker opens, or not
			cb.observe(observation{answered: true, outage: outage, at: tAt(300)})
			if cb.slow.Load() == outage {
				t.Errorf("the host answered, the breaker open %v, in an outage %v: slowed %v, want %v", open, outage, cb.slow.Load(), !outage)
			}
		}
	}
}
