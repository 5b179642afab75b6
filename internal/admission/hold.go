// This file holds the breaker's queue of held retries: how a retry
// enters it, waits its turn (a release, its paced turn, the probe, or its
// limit) and leaves it.

package admission

import (
	"slices"
	"time"
)

// wakeDue wakes the first held retry whose wait has ended, the one to
// probe next, so that a failure costs one wake, not one per held retry.
func (cb *circuit) wakeDue(now time.Time) {
	for _, w := range cb.held {
		if !now.Before(w.notBefore) {
			wakeOne(w)
			return
		}
	}
}

// enter holds the retry w (its request's first failure, its own wait,
// its limit and deadline, and its last answer's round trip set), from
// now; see the rules above. It returns w, for turn and quit.
func (cb *circuit) enter(w *holder, now time.Time) *holder {
	w.since, w.wake = now, make(chan struct{}, 1)
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if !cb.open && len(cb.held) == 0 {
		cb.probes, cb.prevProbe = 0, 0
		cb.schedule(now)
	}
	if cb.changed == nil {
		cb.changed = make(chan struct{})
	}
	cb.held = append(cb.held, w)
	cb.nHeld.Add(1)
	return w
}

// turn applies the rules to the held retry w at now: done reports that
// its hold ended, as end (with its probe's ticket); otherwise it should
// look again at next, or when changed is closed or w.wake fires, which
// ever comes first. Nothing keeps it past its limit, not a probe in
// flight.
func (cb *circuit) turn(w *holder, now time.Time) (end holdEnd, ticket uint64, done bool, next time.Time, changed <-chan struct{}) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	cb.expire(now)
	if end, ticket, done = cb.step(w, now); done {
		return end, ticket, true, now, nil
	}
	return 0, 0, false, cb.nextEvent(w, now), cb.changed
}

// quit takes w out of the hold at now: its caller gave up.
func (cb *circuit) quit(w *holder, now time.Time) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	cb.leave(w, now)
}

// minPacedHold is the shortest hold that a slowed recovery paces: one
// shorter (a backoff of Constant(0), a test's fake that fails each
// request twice) goes at its limit, as it would if no retry had failed.
const minPacedHold = 10 * time.Millisecond

// maxHoldTurns bounds the turns of one hold: each waits for an event or a
// timer, so that no real hold comes near it.
const maxHoldTurns = 1 << 20

// step applies the rules to w; mu is held. done reports that the hold
// ended, as end.
func (cb *circuit) step(w *holder, now time.Time) (end holdEnd, ticket uint64, done bool) {
	if w.state == holdRamping && !now.Before(w.turn) {
		if i := slices.Index(cb.ramp, w); i >= 0 {
			cb.ramp = slices.Delete(cb.ramp, i, i+1)
		}
		w.state, w.epoch = holdGranted, cb.epoch // its turn
	}
	switch w.state {
	case holdGranted:
		switch {
		case w.epoch != cb.epoch:
			// Let go, not yet gone, and the host has failed since: held
			// again.
			w.state = holdWaiting
			cb.held = append(cb.held, w)
			slices.SortStableFunc(cb.held, func(a, b *holder) int { return a.since.Compare(b.since) })
			return 0, 0, false
		case now.Before(w.notBefore):
			return 0, 0, false
		}
		cb.leave(w, now)
		return holdReleased, 0, true
	case holdRamping:
		return 0, 0, false
	}
	if !now.Before(w.limit) {
		cb.leave(w, now)
		if cb.retryFailed.Load() || (cb.slow.Load() && w.limit.Sub(w.since) >= minPacedHold) {
			return holdGiveUp, 0, true
		}
		return holdGo, 0, true
	}
	if cb.probeDue(w, now) {
		return cb.probeOrGiveUp(w, now)
	}
	return 0, 0, false
}

// probeOrGiveUp takes w, due as the probe at now, out of the hold: as
// the probe, or, if the host's answer would come past its deadline
// (tooLate), given up with the response its caller holds, so that it
// does not end with the deadline's error, and the next held retry may
// probe at once; mu is held.
func (cb *circuit) probeOrGiveUp(w *holder, now time.Time) (end holdEnd, ticket uint64, done bool) {
	cb.leave(w, now)
	if cb.tooLate(w, now) {
		return holdGiveUp, 0, true
	}
	return holdProbe, cb.claim(now), true
}

// leave takes w out of the hold or the ramp; mu is held.
func (cb *circuit) leave(w *holder, now time.Time) {
	var q *[]*holder
	switch w.state {
	case holdWaiting:
		q = &cb.held
	case holdRamping:
		q = &cb.ramp
	case holdGone:
		return
	}
	if q != nil {
		if i := slices.Index(*q, w); i >= 0 {
			*q = slices.Delete(*q, i, i+1)
		}
	}
	cb.nHeld.Add(-1)
	w.state = holdGone
	cb.wakeDue(now)
}

// probeDue reports whether w may go as the probe now: none is in flight,
// the probe time has come, and w is the oldest held retry whose own wait
// has ended.
func (cb *circuit) probeDue(w *holder, now time.Time) bool {
	if cb.probing != 0 || now.Before(w.notBefore) || now.Before(cb.nextProbe) {
		return false
	}
	for _, x := range cb.held {
		if !now.Before(x.notBefore) {
			return x == w
		}
	}
	return false
}

// reprobe puts back a probe that the budget did not let go, and looks
// again at the next probe time, minProbeGap from now at the soonest.
func (cb *circuit) reprobe(ticket uint64, now time.Time) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.probing == ticket {
		cb.probing = 0
	}
	cb.schedule(now)
	if at := now.Add(minProbeGap); cb.nextProbe.Before(at) {
		cb.nextProbe = at
	}
}

// nextEvent is when w should look again by itself: its limit, its own
// wait, its turn on the ramp, the end of the probe in flight, or the probe
// time if it is first in line.
func (cb *circuit) nextEvent(w *holder, now time.Time) time.Time {
	switch w.state {
	case holdGranted:
		return w.notBefore
	case holdRamping:
		return w.turn
	}
	t := w.limit
	if now.Before(w.notBefore) && w.notBefore.Before(t) {
		t = w.notBefore
	}
	if cb.probing != 0 && cb.probeEnd.Before(t) {
		t = cb.probeEnd
	}
	if at, first := cb.probeTurn(w, now); first && at.Before(t) {
		t = at
	}
	return t
}

// probeTurn is when the next probe may go, and whether w is first in line
// for it (the oldest held retry whose wait has ended by then).
func (cb *circuit) probeTurn(w *holder, now time.Time) (time.Time, bool) {
	if cb.probing != 0 {
		return time.Time{}, false
	}
	at := cb.nextProbe
	if at.Before(now) {
		at = now
	}
	for _, x := range cb.held {
		if !at.Before(x.notBefore) {
			return at, x == w
		}
	}
	return at, false
}

func wakeOne(w *holder) {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (cb *circuit) signal() {
	if cb.changed != nil {
		close(cb.changed)
	}
	cb.changed = make(chan struct{})
}
