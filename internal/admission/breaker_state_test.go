package admission

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// The breaker's states with time as an argument: no clock, no goroutine,
// each step a call at a given instant.

// newCircuit is a breaker with cfg's settings, and the defaults of a
// 2.8 s schedule for those cfg leaves at zero: a threshold of 10, probes
// 560ms to 700ms apart.
func newCircuit(cfg Breaker) *circuit {
	if cfg.Threshold == 0 {
		cfg.Threshold = 10
	}
	if cfg.ProbeBackoff == nil {
		cfg.ProbeBackoff = between{560 * time.Millisecond, 700 * time.Millisecond}
	}
	return &circuit{cfg: &cfg, tickets: new(atomic.Uint64)}
}

// between draws every delay uniformly in [lo, hi].
type between struct{ lo, hi time.Duration }

func (b between) Delay(int, time.Duration) time.Duration {
	return b.lo + time.Duration(rand.Int64N(int64(b.hi-b.lo)+1))
}

// constant is every delay d.
type constant time.Duration

func (d constant) Delay(int, time.Duration) time.Duration { return time.Duration(d) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func tAt(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// fail and ok tell cb of an attempt that failed or was answered at ms.
func cbFail(cb *circuit, ms int, retry, trip bool) change {
	return cb.observe(observation{failed: true, retry: retry, trip: trip, at: tAt(ms)})
}

func cbOK(cb *circuit, ms int, retry, lend bool) change {
	return cb.observe(observation{answered: true, retry: retry, lend: lend, at: tAt(ms)})
}

func TestCircuitOpensAndClosesInOrder(t *testing.T) {
	cb := newCircuit(Breaker{})
	if v := cb.admit(query{kind: kindRetry, at: tAt(0)}); v.act != actSend {
		t.Fatalf("closed: a retry is %v, want sent", v.act)
	}
	if ch := cbFail(cb, 0, false, true); !ch.opened {
		t.Fatal("a failure at the threshold did not open it")
	}
	if v := cb.admit(query{kind: kindRetry, at: tAt(1)}); v.act != actHold {
		t.Errorf("open: a retry is %v, want held", v.act)
	}
	if v := cb.admit(query{kind: kindFirst, at: tAt(1)}); v.act != actSend {
		t.Errorf("open: a first attempt is %v, want sent (never held)", v.act)
	}
	if ch := cbOK(cb, 5, false, false); !ch.closed {
		t.Fatal("an answer did not close it")
	}
	evs := cb.takeEvents(nil)
	if len(evs) != 2 || !evs[0] || evs[1] {
		t.Errorf("events = %v, want [opened closed]", evs)
	}
	if evs := cb.takeEvents(nil); len(evs) != 0 {
		t.Errorf("events taken twice: %v", evs)
	}
}

func TestCircuitFailFastProbes(t *testing.T) {
	cb := newCircuit(Breaker{FailFast: true, ProbeBackoff: constant(100 * time.Millisecond)})
	cbFail(cb, 0, false, true)
	if v := cb.admit(query{kind: kindFirst, at: tAt(50)}); v.act != actRefuse || v.reason != reasonCircuitOpen {
		t.Fatalf("before the probe time: %v %q, want refused, circuit_open", v.act, v.reason)
	}
	v := cb.admit(query{kind: kindFirst, at: tAt(100)})
	if v.act != actSend || v.probe == 0 {
		t.Fatalf("at the probe time: %v (probe %d), want sent as the probe", v.act, v.probe)
	}
	if w := cb.admit(query{kind: kindFirst, at: tAt(101)}); w.act != actRefuse {
		t.Errorf("a second probe at once: %v, want refused (one at a time)", w.act)
	}
	cb.giveBack(permit{probe: v.probe}, tAt(102)) // not sent after all: another may go
	if w := cb.admit(query{kind: kindFirst, at: tAt(103)}); w.act != actSend || w.probe == 0 {
		t.Errorf("after the probe was given back: %v, want the next probe", w.act)
	}
}

// A held retry goes as the probe when its turn comes, and one held to its
// limit gives up if a retry has failed since the host last answered, and
// goes otherwise.
func TestCircuitHoldProbeAndLimit(t *testing.T) {
	cb := newCircuit(Breaker{ProbeBackoff: constant(100 * time.Millisecond)})
	cbFail(cb, 0, false, true)
	w := cb.enter(&holder{failed: tAt(0), notBefore: tAt(0), limit: tAt(1000)}, tAt(0))
	_, _, done, next, _ := cb.turn(w, tAt(0))
	if done || !next.Equal(tAt(100)) {
		t.Fatalf("at once: done=%v, next %v; want to wait for the probe at 100ms", done, next.Sub(t0))
	}
	end, ticket, done, _, _ := cb.turn(w, tAt(100))
	if !done || end != holdProbe || ticket == 0 {
		t.Fatalf("at 100ms: %v %v %d, want the probe", done, end, ticket)
	}
	cbFail(cb, 110, true, false) // the probe failed: a retry failed
	cb.observe(observation{failed: true, retry: true, probe: ticket, at: tAt(110)})
	w = cb.enter(&holder{failed: tAt(0), notBefore: tAt(0), limit: tAt(1000)}, tAt(120))
	if end, _, done, _, _ = cb.turn(w, tAt(1000)); !done || end != holdGiveUp {
		t.Errorf("at its limit after a failed probe: %v %v, want to give up", done, end)
	}
	cb2 := newCircuit(Breaker{ProbeBackoff: constant(time.Hour)})
	cbFail(cb2, 0, false, true) // first attempts only
	w = cb2.enter(&holder{failed: tAt(0), notBefore: tAt(0), limit: tAt(1000)}, tAt(0))
	if end, _, done, _, _ = cb2.turn(w, tAt(1000)); !done || end != holdGo {
		t.Errorf("at its limit, no retry seen failing: %v %v, want it to go", done, end)
	}
}

// A held retry due as the probe with no more time left before its
// deadline than the host usually takes to answer gives up instead (its
// caller keeps its response), and the next held retry probes at once;
// the host's usual answer is the circuit's, or before it has seen one,
// the retry's own last answer's; with neither, the probe goes.
func TestCircuitProbeLeavesTimeToAnswer(t *testing.T) {
	probe := func(cb *circuit, deadline int, answer time.Duration) holdEnd {
		w := cb.enter(&holder{failed: tAt(0), notBefore: tAt(0), limit: tAt(deadline), deadline: tAt(deadline), answer: answer}, tAt(0))
		end, _, done, _, _ := cb.turn(w, tAt(100))
		if !done {
			t.Fatalf("deadline %dms, answer %v: still held at the probe time", deadline, answer)
		}
		return end
	}
	cb := newCircuit(Breaker{ProbeBackoff: constant(100 * time.Millisecond)})
	cbFail(cb, 0, false, true)
	if end := probe(cb, 130, 0); end != holdProbe {
		t.Errorf("no answer known: %v, want the probe (nothing to go by)", end)
	}
	cb = newCircuit(Breaker{ProbeBackoff: constant(100 * time.Millisecond)})
	cbFail(cb, 0, false, true)
	if end := probe(cb, 130, 50*time.Millisecond); end != holdGiveUp {
		t.Errorf("30ms left, its own answer took 50ms: %v, want to give up", end)
	}
	if end := probe(cb, 130, 30*time.Millisecond); end != holdGiveUp {
		t.Errorf("30ms left, its own answer took 30ms: %v, want to give up", end)
	}
	if end := probe(cb, 1000, 50*time.Millisecond); end != holdProbe {
		t.Errorf("900ms left: %v, want the probe at once, after the one that gave up", end)
	}
	cb = newCircuit(Breaker{ProbeBackoff: constant(100 * time.Millisecond)})
	cbFail(cb, 0, false, true)
	for _, rtt := range []time.Duration{10, 10, 10} {
		cb.observe(observation{failed: true, replied: true, rtt: int64(rtt * time.Millisecond), at: tAt(0)})
	}
	if end := probe(cb, 130, 50*time.Millisecond); end != holdProbe {
		t.Errorf("30ms left, the host answers in 10ms: %v, want the probe (the host's usual answer, not its own)", end)
	}
}

// A recovery lets one held retry go at once; each answer to one frees
// its place, and each window of answers adds one (what goes grows by one
// each round trip), and halts at a failure: one let go and not yet gone
// is held again. (Each goes by its paced turn at the latest: held 100ms
// apart, they would go 100ms apart.)
func TestCircuitSlowStart(t *testing.T) {
	cb := newCircuit(Breaker{ProbeBackoff: constant(time.Hour)})
	cbFail(cb, 0, false, true)
	var ws []*holder
	for i := range 20 { // held 100ms apart: their paced turns, as far apart after the answer, come later
		ws = append(ws, cb.enter(&holder{failed: tAt(0), notBefore: tAt(-2000 + 100*i), limit: tAt(10_000)}, tAt(-2000+100*i)))
	}
	released := func(now int) (n int) {
		for _, w := range ws {
			if w.state == holdGone {
				continue
			}
			if end, _, done, _, _ := cb.turn(w, tAt(now)); done && end == holdReleased {
				n++
			}
		}
		return n
	}
	cbOK(cb, 10, true, true) // a probe answered: the host is back
	if n := released(10); n != slowStart {
		t.Fatalf("the recovery let %d go at once, want %d", n, slowStart)
	}
	cbOK(cb, 15, false, false)
	if n := released(15); n != 0 {
		t.Fatalf("an answer to a first attempt let %d go, want none (it frees no retry's place)", n)
	}
	for range 2 {
		cbOK(cb, 20, true, false)
	}
	if n := released(20); n != 3 { // 2 places freed, and the window of 2 grew by one
		t.Fatalf("two answers to released retries let %d go, want 3", n)
	}
	for range 3 {
		cbOK(cb, 25, true, false)
	}
	if n := released(25); n != 4 { // 3 places freed, the window of 3 grew by one
		t.Fatalf("three more answers let %d go, want 4", n)
	}
	cbOK(cb, 30, true, false) // two more granted...
	cbFail(cb, 31, true, false)
	if n := released(32); n != 0 {
		t.Errorf("after a failure, %d let go before it went still went; want them held again", n)
	}
	cbOK(cb, 40, true, false) // congested: an answer lets one go
	if n := released(40); n != 1 {
		t.Errorf("an answer after the halt let %d go, want 1", n)
	}
	if !cb.borrow() {
		t.Error("the recovery from an outage lends nothing")
	}
	cbFail(cb, 50, false, true)
	cb.open = false // (opened again: the loan ended with it)
	if cb.borrow() {
		t.Error("a loan outlived the host's next outage")
	}
}

// A recovery's loan ends when the host is failing again, whether the
// breaker opens or not: a host that answers and then serves some and
// refuses the rest is overloaded, and nothing is lent or held for it.
func TestLoanEndsWhenTheHostFailsAgain(t *testing.T) {
	cb := newCircuit(Breaker{Threshold: 1_000_000})
	w := cb.enter(&holder{failed: tAt(0), notBefore: tAt(0), limit: tAt(2800)}, tAt(0))
	cbOK(cb, 100, false, true) // the host answers after an outage: a recovery that lends
	if !cb.lends() {
		t.Fatal("the recovery from an outage lends nothing")
	}
	cb.observe(observation{failed: true, at: tAt(105)}) // a failure, the host not failing yet
	if !cb.lends() {
		t.Error("a failure of a host that is not failing ended the loan")
	}
	cb.observe(observation{failed: true, failing: true, at: tAt(110)})
	if cb.lends() {
		t.Error("a loan outlived a failure that left the host failing, with the breaker closed")
	}
	cb.quit(w, tAt(110))
}
