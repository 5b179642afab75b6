// This file holds a host's health, the one score that admission's
// controllers read: how many of its attempts have failed lately, since
// when, and when an attempt that the host answered last started, so that
// an outcome that started before it is known to be stale; and, from the
// same facts, the one rule that tells an outage (the host serves no one)
// from an overload (it serves some and refuses the rest).

package admission

import (
	"math"
	"sync/atomic"
	"time"
)

const (
	// failingAfter is the score at which a host is failing (once its
	// failures have lasted minFailingSpan): the budget lends it no floor.
	failingAfter = 4
	// minFailingSpan is how long failures must have lasted before a host
	// counts as failing, or its breaker opens: failures that all come in
	// one instant (a test's parallel requests with Constant(0), a burst
	// retried at once) are no outage, and holding them would cost
	// requests that succeed a moment later.
	minFailingSpan = 10 * time.Millisecond
	// staleSlack is how far apart two answers' starts may be before the
	// later one is noted: the note costs a store on a shared line, so a
	// busy healthy host takes at most one a millisecond.
	staleSlack = int64(time.Millisecond)
	// quietFactor and minQuiet make the span without an answer after
	// which a failing host is taken to serve no one: quietFactor times
	// its usual gap between answers, and at least minQuiet. A host that
	// serves 10 requests a second and refuses 190 (overload) answers
	// every 100ms: never quiet for 400ms.
	quietFactor = 4
	minQuiet    = int64(100 * time.Millisecond)
)

// health is one host's score: +1 per fresh failure worth retrying, -2 per
// answer, at least 0, at most its cap. It is four words: the times of
// failures are made at the host's first fresh failure, so that a host
// that has never failed keeps none.
type health struct {
	score    atomic.Int32
	gap      atomic.Uint32 // the usual gap between answers, in microseconds (an average), 0 if none yet
	answered atomic.Int64  // mono start of an attempt the host answered lately, 0 if none
	lastOK   atomic.Int64  // mono of the end of the latest answer noted, 0 if none
	fails    atomic.Pointer[failTimes]
}

// failTimes are the times of a host's failures: made at its first.
type failTimes struct {
	since    atomic.Int64 // mono of the failure that took the score off 0
	lastFail atomic.Int64 // mono of the latest fresh failure
}

// noFails are the failure times of a host that has never failed: all
// zero, and only read.
var noFails failTimes

// failed is h's failure times, noFails if it has never failed: to read.
func (h *health) failed() *failTimes {
	if f := h.fails.Load(); f != nil {
		return f
	}
	return &noFails
}

// failures is h's failure times, made if it has none: to write.
func (h *health) failures() *failTimes {
	if f := h.fails.Load(); f != nil {
		return f
	}
	h.fails.CompareAndSwap(nil, new(failTimes))
	return h.fails.Load()
}

// gapNS is the usual gap between answers, in nanoseconds; 0 if none yet.
func (h *health) gapNS() int64 { return int64(h.gap.Load()) * int64(time.Microsecond) }

// level is the host's score now: 0 for a healthy host.
func (h *health) level() int32 { return h.score.Load() }

// stale reports whether an attempt that started at start began before an
// attempt that the host has answered since: its failure says nothing of
// the host now.
func (h *health) stale(start int64) bool { return start < h.answered.Load() }

// answer takes an answer to an attempt that started at start: it notes
// the start, and takes 2 off the score. On a healthy host it writes at
// most once a millisecond.
func (h *health) answer(start, end int64) {
	if start > h.answered.Load()+staleSlack {
		h.answered.Store(start)
	}
	if last := h.lastOK.Load(); end > last+staleSlack {
		h.lastOK.Store(end)
		if last != 0 {
			h.learnGap(end - last)
		}
	}
	for {
		s := h.score.Load()
		if s == 0 {
			return
		}
		n := max(s-2, 0)
		if h.score.CompareAndSwap(s, n) {
			if f := h.fails.Load(); n == 0 && f != nil {
				f.since.Store(0)
			}
			return
		}
	}
}

// fail adds a fresh failure at m (mono) to the score, up to cap, and
// returns it.
func (h *health) fail(m int64, cap int32) int32 {
	f := h.failures()
	if f.lastFail.Load() < m {
		f.lastFail.Store(m)
	}
	for {
		s := h.score.Load()
		if s >= cap {
			return s
		}
		if h.score.CompareAndSwap(s, s+1) {
			if s == 0 {
				f.since.Store(m)
			}
			return s + 1
		}
	}
}

// reset clears the score: the breaker closed.
func (h *health) reset() {
	h.score.Store(0)
	if f := h.fails.Load(); f != nil {
		f.since.Store(0)
	}
}

// lasted reports whether the failures have lasted minFailingSpan at m.
func (h *health) lasted(m int64) bool {
	since := h.failed().since.Load()
	return since != 0 && m-since >= int64(minFailingSpan)
}

// failing reports whether the host is failing at m: the score has reached
// failingAfter, the failures have lasted minFailingSpan, and the host has
// not answered since the latest of them (its last word was a failure).
func (h *health) failing(m int64) bool {
	return h.score.Load() >= failingAfter && h.lasted(m) && h.answered.Load() <= h.failed().lastFail.Load()
}

// learnGap takes a gap between two answers into the usual gap: an average
// over about 8 gaps, where one gap counts for at most twice the average,
// so that an outage's silence does not teach the host to be silent. It
// is kept in microseconds, up to 71 minutes: a gap is over a millisecond
// (staleSlack).
func (h *health) learnGap(d int64) {
	g := h.gapNS()
	if g != 0 {
		d = g + (min(d, 2*g)-g)/8
	}
	h.gap.Store(uint32(min(max(d/int64(time.Microsecond), 1), math.MaxUint32)))
}

// quiet reports whether the host has gone without an answer at m for
// longer than it usually does: quietFactor times its usual gap between
// answers, and at least minQuiet; or has never answered.
func (h *health) quiet(m int64) bool {
	last := h.lastOK.Load()
	return last == 0 || m-last > max(quietFactor*h.gapNS(), minQuiet)
}

// down reports whether the host serves no one at m, as far as the client
// can see: several fresh failures in a row (the score has reached
// failingAfter and the latest word was a failure), and no answer for
// longer than its usual gap. It does not ask that the failures have
// lasted: a burst that failed in one instant on a host that never
// answered, or is quiet, may be an outage.
func (h *health) down(m int64) bool {
	return h.score.Load() >= failingAfter && h.answered.Load() <= h.failed().lastFail.Load() && h.quiet(m)
}

// unanswered reports whether the host is failing at m and has answered
// nothing since its failures began, for longer than its usual gap between
// answers and at least minQuiet: it has missed an answer it would have
// given, as an outage begins, where an overload's answers keep coming
// among its refusals. It may be an outage not yet sure: a host that
// answers seldom is quiet for 4 of its gaps only long after.
func (h *health) unanswered(m int64) bool {
	last := h.lastOK.Load()
	return h.failing(m) && last < h.failed().since.Load() && m-last > max(h.gapNS(), minQuiet)
}

// outage reports whether the host is in an outage at m: it is down, and
// its failures have lasted minFailingSpan. An outage holds retries
// instead of refusing them; an overload (failures mixed with answers) is
// the budget's, as ever.
func (h *health) outage(m int64) bool { return h.down(m) && h.lasted(m) }
