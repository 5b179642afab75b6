// This file holds the concurrency limit, one of admission's pacers
// (the protocol is in admission.go): per host, at most limit attempts in flight, the rest
// waiting in a short queue for their turn, no longer than their deadline;
// with a range, the limit adapts to the host: down when its answers slow
// or it sheds (429, 503), up while they come back as fast as it can serve.

package admission

import (
	"math"
	"slices"
	"sync"
	"time"
)

const (
	// limitTolerance is how much slower than the fastest recent answer an
	// answer may be and still count as unqueued: slower, the host is
	// queueing, and the limit goes down.
	limitTolerance = 1.25
	// limitBackoff is what a drop multiplies the limit by.
	limitBackoff = 0.9
	// limitMinWindow is how long the fastest answer, and the host's own
	// share of slow answers, are remembered: the least of this
	// window and the one before, so that a host that became slower for
	// good is believed within two windows.
	limitMinWindow = 10 * time.Second
	// limitRound is the fewest answers a round counts, so that its share
	// of slow answers means something at a small limit.
	limitRound = 16
	// limitSlowShare is how much larger than the host's own a round's
	// share of slow answers may be before the limit is cut: a host whose
	// answers are queued beyond this share has more in flight than it
	// serves at once.
	limitSlowShare = 0.15
)

// Limit is the concurrency limit's range: fixed with Min == Max.
type Limit struct{ Min, Max int }

// limiter is one host's concurrency limit.
type limiter struct {
	cfg       *Limit
	mu        sync.Mutex
	limit     float64
	inflight  int
	waiters   []*waiter  // FIFO; one whose wake is closed was granted a slot
	minRTT    [2]int64   // the fastest answer of this window and of the last
	ownSlow   float64    // the share of slow answers of rounds in which at most half the limit was in use, smoothed; -1: none yet
	leastSlow [2]float64 // the least share of slow answers of a round, this window and the last
	windowAt  int64      // mono start of this window
	round     limitRoundCount
	g         gauge
}

// limitRoundCount counts a round's answers: in all, slow, and drops.
type limitRoundCount struct{ n, slow, drops int }

// newLimiter is a host's concurrency limit, its state shown on g.
func newLimiter(cfg *Limit, g gauge) *limiter {
	l := new(limiter)
	l.init(cfg)
	l.g = g
	return l
}

func (l *limiter) init(cfg *Limit) {
	l.cfg, l.limit = cfg, float64(cfg.Max)
	l.leastSlow, l.ownSlow = [2]float64{1, 1}, -1
}

// admit gives an attempt a slot if one is free; otherwise it takes a
// place in the line (a.waiter, once it has one), to wait until it is
// granted a slot or its deadline, or, with max waiting already, is
// refused.
func (l *limiter) admit(a query) verdict {
	switch {
	case a.kind == kindHedge:
		return refuse(reasonLimit) // a copy would hold no slot: none
	case !a.kind.sending():
		return send
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := a.waiter; w != nil {
		if w.granted() {
			return verdict{act: actSend, permit: permit{took: true}}
		}
		if a.deadline != 0 && a.now >= a.deadline {
			l.leaveLocked(w)
			return refuse(reasonLimit)
		}
		return l.wait(a, w)
	}
	switch {
	case len(l.waiters) == 0 && l.inflight < l.cap():
		l.inflight++
		return verdict{act: actSend, permit: permit{took: true}}
	case len(l.waiters) >= l.cfg.Max, a.level < 0 && 2*len(l.waiters) >= l.cfg.Max:
		return refuse(reasonLimit) // the line is full; for a sheddable attempt, half full
	}
	w := newWaiter()
	w.level = a.level
	l.waiters = append(l.waiters, w)
	return l.wait(a, w)
}

// wait is the verdict of w, in line: wait until it is granted a slot, or
// until its deadline.
func (l *limiter) wait(a query, w *waiter) verdict {
	v := verdict{act: actWait, reason: reasonLimit, wake: w.wake, waiter: w, wait: -1}
	if a.deadline != 0 {
		v.wait = time.Duration(a.deadline - a.now)
	}
	return v
}

// cap is the whole number of slots; mu is held.
func (l *limiter) cap() int { return max(int(l.limit), 1) }

// giveBack gives back a slot taken for an attempt that is not sent, and the
// place in line of one that gave up waiting (its slot, if it was granted
// one as it gave up).
func (l *limiter) giveBack(t permit, _ time.Time) {
	if t.took || t.waiter != nil {
		l.mu.Lock()
		if t.took {
			l.releaseLocked()
		}
		if t.waiter != nil {
			l.leaveLocked(t.waiter)
		}
		l.mu.Unlock()
	}
}

// leaveLocked takes w out of the line, or gives back the slot it was
// granted; mu is held.
func (l *limiter) leaveLocked(w *waiter) {
	if w.granted() {
		l.releaseLocked()
		return
	}
	if i := slices.Index(l.waiters, w); i >= 0 {
		l.waiters = slices.Delete(l.waiters, i, i+1)
	}
}

// releaseLocked frees a slot: the next waiter takes it, if the limit
// allows, the first of the highest criticality in line, unless the first
// in line has been passed over as often as the line is long (so that a
// waiter without a deadline is served under a steady stream of more
// critical ones); mu is held.
func (l *limiter) releaseLocked() {
	l.inflight--
	for len(l.waiters) > 0 && l.inflight < l.cap() {
		next := 0
		if l.waiters[0].passed < l.cfg.Max {
			for i, w := range l.waiters {
				if w.level > l.waiters[next].level {
					next = i
				}
			}
		}
		for _, w := range l.waiters[:next] {
			w.passed++
		}
		w := l.waiters[next]
		if next == 0 {
			l.waiters[0] = nil
			l.waiters = l.waiters[1:]
		} else {
			l.waiters = slices.Delete(l.waiters, next, next+1)
		}
		l.inflight++
		close(w.wake)
	}
}

// observe frees the slot of an attempt that ended and, with a range,
// adapts the limit to how it ended.
func (l *limiter) observe(o observation) change {
	if !o.took {
		return change{}
	}
	l.mu.Lock()
	if l.cfg.Min < l.cfg.Max {
		l.adapt(o)
	}
	l.releaseLocked()
	v := l.limit
	l.mu.Unlock()
	l.g.set(v)
	return change{}
}

// adapt moves the limit, once a round (max(limit, limitRound) answers,
// about a round trip); mu is held. A round with a drop (429, 503, a
// timeout) cuts it by a tenth; so does one whose share of slow answers
// (1.25 × slower than the fastest of late) is larger than the host's own
// by limitSlowShare, and by more than chance (two standard deviations):
// queueing makes some answers slow beyond those the host's own spread
// makes slow. The host's own share is learnt from rounds in which at most
// half the limit was in use (this client cannot have queued them), and
// is never taken below the least share of any round of late. Any other
// round, while at least half the limit is in use, adds one.
//
// What it cannot tell apart: a host whose answers vary widely of
// themselves (±30% and more) and that is loaded from the first request,
// so that no round shows its own spread, looks queued, and the limit
// falls towards min. docs/overload.md says so; min is the floor.
func (l *limiter) adapt(o observation) {
	slow := l.slow(o)
	switch {
	case o.rejected:
		l.round.drops++
	case o.canceled && !slow:
		return // ended by its caller: it says only that it was at least that slow
	case slow:
		l.round.slow++
	}
	l.round.n++
	if l.round.n >= max(int(l.limit), limitRound) {
		l.endRound()
	}
}

// slow notes how long o took, and reports whether that was slow: more
// than limitTolerance × the fastest answer of this window and the last
// (a window is limitMinWindow long); mu is held.
func (l *limiter) slow(o observation) bool {
	if o.now-l.windowAt > int64(limitMinWindow) {
		l.minRTT = [2]int64{0, l.minRTT[0]}
		l.leastSlow = [2]float64{1, l.leastSlow[0]}
		l.windowAt = o.now
	}
	if !o.rejected && !o.canceled && o.rtt > 0 && (l.minRTT[0] == 0 || o.rtt < l.minRTT[0]) {
		l.minRTT[0] = o.rtt
	}
	fastest := l.minRTT[0]
	if l.minRTT[1] != 0 {
		fastest = min(fastest, l.minRTT[1])
	}
	return fastest > 0 && float64(o.rtt) > limitTolerance*float64(fastest)
}

// endRound moves the limit on a round's answers, and learns the host's
// own share of slow answers from a round in which at most half the limit
// was in use; mu is held.
func (l *limiter) endRound() {
	n := float64(l.round.n)
	share := float64(l.round.slow) / n
	own := min(l.leastSlow[0], l.leastSlow[1])
	if l.ownSlow >= 0 {
		own = max(own, l.ownSlow)
	}
	queued := own < 1 && share > own+limitSlowShare+2*math.Sqrt(own*(1-own)/n)
	unloaded := float64(l.inflight)*2 <= l.limit
	switch {
	case l.round.drops > 0 || queued:
		l.limit = math.Max(float64(l.cfg.Min), l.limit*limitBackoff)
	case !unloaded:
		l.limit = math.Min(float64(l.cfg.Max), l.limit+1)
	}
	if unloaded {
		if l.ownSlow < 0 {
			l.ownSlow = share
		}
		l.ownSlow += (share - l.ownSlow) / 8
	}
	l.leastSlow[0] = min(l.leastSlow[0], share)
	l.round = limitRoundCount{}
}

// idle reports whether forgetting the host would lose nothing: no slot
// in use or awaited (none, if the limit is off).
func (l *limiter) idle(int64) bool {
	if l.cfg == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight == 0 && len(l.waiters) == 0
}
