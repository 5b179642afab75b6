// This file holds the static rate limit, one of admission's pacers
// (the protocol is in admission.go): per host, a token bucket with a line of waiters, first
// come first served, for servers that say nothing of their quota.

package admission

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Rate is the static rate: attempts a second, in bursts of at most Burst.
type Rate struct {
	PerSecond float64
	Burst     int
}

// staticRate is one host's token bucket and its line. A waiter's turn
// comes when the bucket holds a token for it and for each waiter ahead of
// it; a waiter that leaves the line (canceled, or past its deadline), or
// a turn taken and not used, moves everyone behind it up at once: a turn
// not used is never lost. (x/time/rate's reservations cannot give a turn
// back once a later one is made, so the bucket is kept here.)
type staticRate struct {
	cfg     *Rate
	mu      sync.Mutex
	tokens  float64
	at      int64         // mono of tokens
	line    []*waiter     // first come first
	changed chan struct{} // closed, and replaced, when the line moves up
}

// newStaticRate is a host's static rate limit.
func newStaticRate(cfg *Rate) *staticRate {
	s := new(staticRate)
	s.init(cfg)
	return s
}

func (s *staticRate) init(cfg *Rate) {
	s.cfg, s.tokens = cfg, float64(cfg.Burst)
}

// fill adds the tokens earned since the last fill, up to the burst; mu is
// held.
func (s *staticRate) fill(now int64) {
	if now > s.at {
		s.tokens = min(s.tokens+float64(now-s.at)/float64(time.Second)*s.cfg.PerSecond, float64(s.cfg.Burst))
		s.at = now
	}
}

// until is how long from now until the bucket holds pos+1 tokens: the
// turn of the waiter at pos; mu is held.
func (s *staticRate) until(now int64, pos int) time.Duration {
	s.fill(now)
	need := float64(pos+1) - s.tokens
	if need <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(need / s.cfg.PerSecond * float64(time.Second)))
}

// admit takes a turn now, or takes a place in the line (a.waiter, once
// it has one) to wait for its turn; none if its turn would come past its
// deadline.
func (s *staticRate) admit(a query) verdict {
	switch {
	case a.kind == kindHedge:
		return refuse(reasonRate) // a copy would take no turn: none
	case !a.kind.sending():
		return send
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	me, pos := a.waiter, len(s.line)
	if me != nil {
		pos = slices.Index(s.line, me)
	}
	d := s.until(a.now, pos)
	switch {
	case d == 0 && pos == 0:
		s.tokens--
		s.leave(me)
		return tookIt
	case a.deadline != 0 && a.now+int64(d) >= a.deadline:
		s.leave(me) // its turn would come too late
		return refuse(reasonRate)
	}
	if me == nil {
		me = newWaiter()
		s.line = append(s.line, me)
	}
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return verdict{act: actWait, reason: reasonRate, wait: d, wake: s.changed, waiter: me}
}

// leave takes me out of the line, if it is in it, and tells those
// behind it to look again; mu is held.
func (s *staticRate) leave(me *waiter) {
	if me == nil {
		return
	}
	if i := slices.Index(s.line, me); i >= 0 {
		s.line = slices.Delete(s.line, i, i+1)
	}
	s.moved()
}

// moved tells the waiters to look again; mu is held.
func (s *staticRate) moved() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// giveBack gives back a turn taken for an attempt that is not sent, and the
// place in line of one that gave up waiting.
func (s *staticRate) giveBack(t permit, _ time.Time) {
	if t.took || t.waiter != nil {
		s.mu.Lock()
		if t.took {
			s.tokens = min(s.tokens+1, float64(s.cfg.Burst))
			s.moved()
		}
		s.leave(t.waiter)
		s.mu.Unlock()
	}
}

func (s *staticRate) observe(observation) change { return change{} }

// idle reports whether forgetting the host would lose nothing at now:
// its bucket full, no one in line (or the rate is off).
func (s *staticRate) idle(now int64) bool {
	if s.cfg == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fill(now)
	return len(s.line) == 0 && s.tokens >= float64(s.cfg.Burst)
}
