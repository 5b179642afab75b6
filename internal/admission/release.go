// This file holds the breaker's release: how an answer after an outage
// lets the held retries go (a slow start that grows by one each round
// trip, paced turns at the latest), how a failure halts it, and how a
// host that turns the released retries away slows it to a share of its
// fresh answers.

package admission

import (
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"
)

// recovery is the circuit's release under way; mu guards it, but slow
// and lending, which are mirrored for the lock-free reads.
type recovery struct {
	ramp   []*holder // released, waiting for their grant or turn, earliest due first
	credit int       // grants the next answers have earned
	// window is how many released retries the recovery keeps going: each
	// answer to one frees its place, and each window of answers adds
	// one, so that what goes grows by one each round trip (not twice
	// over), and overshoots a host's limit by one, not by half.
	window, grown int
	// congested: an attempt has failed since the recovery began; each
	// answer to a released retry then frees its place only.
	congested bool
	// epoch counts the times the ramp was halted: a retry let go before
	// its own wait has ended, and a halt since, is held again.
	epoch uint64
	// loan is how many retries the recovery under way may still release
	// beyond the budget's share (lend in budget.go): set when a host that
	// served no one answers again while the budget owes nothing; the
	// retries held, twice over, so that those the recovered host turns
	// away can be held and released again. It ends when the host is
	// failing again, the breaker open or not, or the recovery slows.
	// lending mirrors loan > 0.
	loan    int
	lending atomic.Bool
	// began is when the recovery began; fresh, that a first attempt has
	// been answered since; oks and refused count the retries that the
	// host answered and turned away since.
	began        time.Time
	fresh        bool
	oks, refused int
	// slow: the host turns away a fifth of the retries released while it
	// answers first attempts (it is back, but weaker than before). The
	// held then go one per slowShare first attempts answered, and none
	// at its paced turn, and one at its limit gives up. paced counts the
	// answers toward the next, from a random phase, so that a fleet's
	// instances, slowed together, do not send together.
	slow  atomic.Bool
	paced int
}

// slowStart is how many held retries a recovery lets go at once; then
// each answer to one of them frees its place, and the window grows by
// one each round trip (see answered).
const slowStart = 1

// slowShare: a slowed recovery lets one held retry go per slowShare first
// attempts answered, a quarter of the host's fresh traffic on top of it.
const slowShare = 4

// answered closes the circuit and releases every held retry onto the
// ramp, in the order they were due: a slow start, slowStart at once and
// more as the host answers them, so that a process whose callers wait on
// held retries frees them within a few round trips of the host's, while
// an instance with little traffic of its own (one of a fleet) lets its
// backlog go at its paced turns at the latest, so that a fleet's
// backlogs do not come back together. With lend (the host served no one
// until this answer, and the budget owes nothing), the recovery may
// release them beyond the budget's share. A slowed recovery lets them go
// by its share of the host's fresh answers only, and stays slowed through
// a weak host's refusals, the breaker open or not; an outage ends it (the
// host served no one: it went down, it was not turned away by what was
// released), and the next answer begins a new recovery.
func (cb *circuit) answered(now time.Time, o observation) {
	retry, lend, slow := o.retry, o.lend, cb.slow.Load()
	if lend || (cb.open && !slow) || (slow && o.outage) || cb.over(now) {
		cb.recovery.begin(now)
	}
	cb.open, cb.probing = false, 0
	cb.isOpen.Store(false)
	cb.retryFailed.Store(false)
	if lend && len(cb.held) > 0 && cb.loan == 0 {
		cb.setLoan(2 * (len(cb.held) + len(cb.ramp)))
	}
	if cb.slowAnswer(retry, now) {
		return
	}
	start := len(cb.held) > 0 && len(cb.ramp) == 0 && !cb.congested
	if len(cb.held) > 0 {
		cb.release(now)
	}
	cb.earn(start, retry)
	cb.grant(&cb.ramp, now)
}

// earn credits the ramp for an answer: slowStart if it starts the
// release, else, for an answer to a retry, its place, and one more for
// each window of them unless the recovery is congested; mu is held.
func (cb *circuit) earn(start, retry bool) {
	switch {
	case len(cb.ramp) == 0:
		cb.credit = 0
	case start:
		cb.credit, cb.window, cb.grown = slowStart, slowStart+1, 0
	case retry:
		cb.credit++
		if cb.grown++; !cb.congested && cb.grown >= cb.window {
			cb.window, cb.grown, cb.credit = cb.window+1, 0, cb.credit+1
		}
	}
}

// slowAnswer counts an answer to the recovery under way, at now; if it is
// slowed, the answer is all it is told: a first attempt's, each
// slowShare-th, lets the oldest held retry of the highest criticality go
// (grant). It reports whether it was.
func (cb *circuit) slowAnswer(retry bool, now time.Time) bool {
	if retry {
		cb.oks++
	} else {
		cb.fresh = true
	}
	if !cb.slow.Load() {
		return false
	}
	if !retry {
		if cb.paced++; cb.paced%slowShare == 0 {
			cb.credit++
		}
	}
	cb.grant(&cb.held, now)
	return true
}

// begin starts a new recovery at now.
func (r *recovery) begin(now time.Time) {
	r.began, r.fresh, r.congested = now, false, false
	r.oks, r.refused = 0, 0
	r.slow.Store(false)
}

// over reports whether a slowed recovery has ended by now: nothing is
// held and its span (the breaker's Schedule) has passed since it began.
func (cb *circuit) over(now time.Time) bool {
	return cb.slow.Load() && len(cb.held)+len(cb.ramp) == 0 && now.Sub(cb.began) > cb.cfg.Schedule
}

// turnedAway takes an attempt that failed at now, while the circuit
// stayed closed: a recovery under way (retries on the ramp, let go and
// not yet gone, or one that began within the Schedule) is congested, and
// slows once a fifth of its released retries fail while the host answers
// first attempts; mu is held.
func (cb *circuit) turnedAway(retry bool, now time.Time) {
	under := len(cb.ramp) > 0 || int(cb.nHeld.Load()) > len(cb.held) ||
		(!cb.began.IsZero() && now.Sub(cb.began) < cb.cfg.Schedule)
	if !under {
		return
	}
	cb.congested = true
	if retry {
		cb.refused++
	}
	if !cb.slow.Load() && cb.fresh && 4*cb.refused > cb.oks {
		cb.slow.Store(true)
		cb.setLoan(0)
		cb.credit, cb.paced = 0, rand.IntN(slowShare)
	}
}

// release moves every held retry onto the ramp, each with its paced
// turn: as long after now as it was due after the first of them (its own
// wait, or when it was held), within half of what is left of its limit,
// and never before its own wait; the turns go to the critical retries
// first (criticalFirst); mu is held.
func (cb *circuit) release(now time.Time) {
	due := func(w *holder) time.Time {
		if w.notBefore.After(w.since) {
			return w.notBefore
		}
		return w.since
	}
	first := due(cb.held[0])
	for _, w := range cb.held[1:] {
		if d := due(w); d.Before(first) {
			first = d
		}
	}
	for _, w := range cb.held {
		turn := now.Add(min(due(w).Sub(first), max(w.limit.Sub(now), 0)/2))
		if turn.Before(w.notBefore) {
			turn = w.notBefore
		}
		w.state, w.turn = holdRamping, turn
	}
	criticalFirst(cb.held, now)
	cb.ramp = append(cb.ramp, cb.held...)
	slices.SortStableFunc(cb.ramp, func(a, b *holder) int { return a.turn.Compare(b.turn) })
	clear(cb.held)
	cb.held = cb.held[:0]
	cb.signal()
}

// criticalFirst gives the earliest turns of ws to its most critical
// retries, each in the order it had among its own, none before its own
// wait, nor past half of what is left of its limit at now (as release
// has it); with one criticality, it changes nothing.
func criticalFirst(ws []*holder, now time.Time) {
	if !slices.ContainsFunc(ws, func(w *holder) bool { return w.level != ws[0].level }) {
		return
	}
	turns := make([]time.Time, len(ws))
	for i, w := range ws {
		turns[i] = w.turn
	}
	slices.SortFunc(turns, time.Time.Compare)
	slices.SortStableFunc(ws, func(a, b *holder) int {
		if a.level != b.level {
			return int(b.level) - int(a.level)
		}
		return a.turn.Compare(b.turn)
	})
	for i, w := range ws {
		w.turn = turns[i]
		if late := now.Add(max(w.limit.Sub(now), 0) / 2); w.turn.After(late) {
			w.turn = late
		}
		if w.turn.Before(w.notBefore) {
			w.turn = w.notBefore
		}
	}
}

// grant lets the first retries of q (the ramp, or the held) go, one per
// credit: the first in line, unless one more critical behind it has
// ended its own wait by now.
func (cb *circuit) grant(q *[]*holder, now time.Time) {
	for cb.credit > 0 && len(*q) > 0 {
		next := 0
		for i, w := range *q {
			if w.level > (*q)[next].level && !w.notBefore.After(now) {
				next = i
			}
		}
		w := (*q)[next]
		*q = slices.Delete(*q, next, next+1)
		cb.credit--
		w.state, w.epoch = holdGranted, cb.epoch
		wakeOne(w)
	}
}

// rehold puts the retries on the ramp back in the hold: the host failed
// again before they went.
func (cb *circuit) rehold() {
	cb.epoch++
	if len(cb.ramp) == 0 {
		return
	}
	for _, w := range cb.ramp {
		w.state = holdWaiting
	}
	cb.held = append(cb.held, cb.ramp...)
	slices.SortStableFunc(cb.held, func(a, b *holder) int { return a.since.Compare(b.since) })
	clear(cb.ramp)
	cb.ramp, cb.credit = cb.ramp[:0], 0
	cb.signal()
}

// setLoan sets what the recovery under way may lend; mu is held.
func (cb *circuit) setLoan(n int) {
	cb.loan = n
	if cb.lending.Load() != (n > 0) {
		cb.lending.Store(n > 0)
	}
}

// borrow takes one retry of the recovery's loan, if any is left.
func (cb *circuit) borrow() bool {
	if !cb.lending.Load() {
		return false
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.loan == 0 {
		return false
	}
	cb.setLoan(cb.loan - 1)
	return true
}
