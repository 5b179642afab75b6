// This file holds the Gate, a Transport's admission: how its settings
// make a host's list of controllers, how the list is asked about an
// attempt (with the waits a pacer asks for) and told how each attempt
// ended, and how a breaker's transitions are reported.

package admission

import (
	"cmp"
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Settings are what a Transport's options turn on in admission.
type Settings struct {
	Budget   *Share   // nil: no budget
	Breaker  *Breaker // resolved; nil: no breaker
	Hedge    bool     // hedging is on: hosts keep their recent latencies
	Throttle float64  // the throttle's ratio; 0: off
	Rate     *Rate    // nil: no static rate
	Quota    *Quota   // nil: no quota pacing
	Limit    *Limit   // nil: no concurrency limit
	// Gauges show the throttle's, the quota's and the limit's state, in
	// that order; nil: none.
	Gauges [3]interface{ Set(float64) }
	// Notify reports a breaker transition (metrics, a log record, the
	// user's callback), OnRelease a held retry released and OnProbe one
	// sent as the probe, with its request's context (the simulator's):
	// the Transport's, so that no Gate method needs a request.
	Notify    func(ctx context.Context, host string, open bool, score int)
	OnRelease func(host string, lent bool)
	OnProbe   func(ctx context.Context, host string)
}

// gauge is a pacer's gauge, which may be none.
type gauge struct{ g interface{ Set(float64) } }

func (g gauge) set(v float64) {
	if g.g != nil {
		g.g.Set(v)
	}
}

// Gate is a Transport's admission: its budget, breaker and hedging, its
// pacers, and the state of every host it has sent to.
type Gate struct {
	s        Settings
	budget   *Share   // nil: no budget
	breaker  *Breaker // resolved; nil: no breaker
	paced    bool     // any pacer is on
	scoreCap int32    // where a host's score stops: no higher than what opens the breaker, so that a long outage is forgotten as fast as a short one
	hosts    hostMap[hostState]
	tickets  atomic.Uint64 // names probes; its count is the probes claimed
}

// controllers is admission's list, in its order, written once: for each
// controller, whether a Transport's settings turn it on, whether it is a
// pacer, and how a new host gets it. A new pacer is its own file, its
// reason and a line here.
var controllers = [...]struct {
	on    func(s *Settings) bool
	pacer bool
	add   func(g *Gate, h *hostState, c *controls) controller
}{
	{func(s *Settings) bool { return s.Budget != nil }, false, func(g *Gate, h *hostState, c *controls) controller {
		c.bud = budgetCtl{b: g.budget, h: &h.bud} // every host counts its first attempts, from the first
		return &c.bud
	}},
	{func(s *Settings) bool { return s.Breaker != nil }, false, func(g *Gate, _ *hostState, c *controls) controller {
		c.cb.cfg, c.cb.tickets = g.breaker, &g.tickets // the probes' tickets are the Gate's
		return &c.cb
	}},
	{func(s *Settings) bool { return s.Throttle != 0 }, true, func(g *Gate, _ *hostState, _ *controls) controller {
		return newThrottle(g.s.Throttle, gauge{g.s.Gauges[0]})
	}},
	{func(s *Settings) bool { return s.Rate != nil }, true, func(g *Gate, _ *hostState, _ *controls) controller {
		return newStaticRate(g.s.Rate)
	}},
	{func(s *Settings) bool { return s.Quota != nil }, true, func(g *Gate, _ *hostState, _ *controls) controller {
		return newQuota(g.s.Quota, gauge{g.s.Gauges[1]})
	}},
	{func(s *Settings) bool { return s.Limit != nil }, true, func(g *Gate, _ *hostState, _ *controls) controller {
		return newLimiter(g.s.Limit, gauge{g.s.Gauges[2]})
	}},
}

// paced reports whether any pacer is on.
func (s *Settings) paced() bool {
	for _, x := range controllers {
		if x.pacer && x.on(s) {
			return true
		}
	}
	return false
}

// on reports whether s turns anything of admission on.
func (s *Settings) on() bool {
	return s.Budget != nil || s.Breaker != nil || s.Hedge || s.paced()
}

// New is the Gate of a Transport with settings s; nil if they turn
// nothing on.
func New(s Settings) *Gate {
	if !s.on() {
		return nil
	}
	if s.Notify == nil {
		s.Notify = func(context.Context, string, bool, int) {}
	}
	if b := s.Budget; b != nil && b.own && !b.claimed.CompareAndSwap(false, true) {
		panic("admission: an owned Share given to a second Gate")
	}
	g := &Gate{s: s, budget: s.Budget, breaker: s.Breaker, paced: s.paced(), scoreCap: failingAfter}
	if g.breaker != nil {
		g.scoreCap = int32(max(g.breaker.Threshold, failingAfter))
	}
	g.hosts.init = g.initHost
	g.hosts.evictable = func(h *hostState) bool {
		if !h.idle(mono()) {
			return false
		}
		if g.budget != nil {
			h.bud.detach(g.budget) // evicted: the shared Share's entry may go once no one points to it
		}
		return true
	}
	return g
}

// admitFirst asks the controllers for a first attempt that First does
// not admit on its own: with pacers, or while the host's breaker is open.
func (g *Gate) admitFirst(t *Ticket) (string, error) {
	g.controlsOf(t.hs)
	a := t.question(kindFirst)
	a.sec, a.healthy, a.charged = t.sec, true, t.p.charged
	v, err := g.admit(t, a)
	if v.act != actSend {
		return v.reason, err
	}
	t.start = mono() // sent now: its latency and staleness count from here, not from its waits
	return "", nil
}

// chargeRepeat charges a layer above's retry to the budget as the retry
// it is, if the share has room: then it is not counted as a first
// attempt. One the share has no room for still goes (retryhttp never
// refuses a caller's own attempt for the budget), counted as a first.
func (g *Gate) chargeRepeat(t *Ticket) {
	if g.budget == nil {
		return
	}
	if v := g.budgetOf(t.hs).admit(t.question(kindRepeat)); v.act == actSend {
		t.p = t.p.with(v.permit)
	}
}

// admit asks each of the host's controllers, in order, about an attempt
// of a.kind, and waits out each wait one asks for before asking it again:
// the first refusal decides; a hold decides if no one refuses. What they
// take goes into the permit (t.p); an attempt that does not go takes
// nothing. A wait that the context ends returns its error, with the
// waiting pacer's reason, none if the caller canceled it.
func (g *Gate) admit(t *Ticket, a query) (verdict, error) {
	held := false
	for i, c := range t.hs.list() {
		v := c.admit(a)
		var err error
		if v.act == actWait {
			v, err = t.waitOut(c, a, v) // a pacer's
		}
		t.p = t.p.with(v.permit)
		if v.took {
			t.p.paced |= 1 << i
		}
		switch {
		case v.act == actRefuse:
			t.giveBack(t.p)
			return v, err
		case v.act == actHold:
			held = true
		}
	}
	if held {
		t.giveBack(t.p)
		return hold, nil
	}
	return send, nil
}

// waitOut waits out v, the wait that c asked for an attempt (a), and asks
// c again, after each wait it asks for: at a time, or when its line moves.
// It returns c's answer that is not a wait. A wait that ends with the
// context leaves the line, and refuses with the context's error.
func (t *Ticket) waitOut(c controller, a query, v verdict) (verdict, error) {
	began := a.now
	for turn := 0; v.act == actWait; turn++ {
		err := await(t.ctx, v.wake, nil, v.wait)
		if err == nil && turn == maxWaitTurns {
			err = errTooManyWaits
		}
		if dl := t.ctxEnd; err == nil && !dl.IsZero() && !time.Now().Before(dl) {
			err = context.DeadlineExceeded // the deadline, met first by the wait's own timer
		}
		if err != nil {
			c.giveBack(permit{waiter: v.waiter}, time.Time{})
			return refuse(callersEnd(v.reason, err)), err
		}
		a.at = time.Now()
		a.now = monoAt(a.at)
		a.waited, a.turn, a.waiter = time.Duration(a.now-began), turn+1, v.waiter
		v = c.admit(a)
	}
	return v, nil
}

// maxWaitTurns bounds the waits of one attempt in one pacer: each
// follows a move of its line or the time it was told; errTooManyWaits
// ends it past that (never in practice).
const maxWaitTurns = 1 << 20

var errTooManyWaits = errors.New("retryhttp: waited too often for a pacer")

// callersEnd is the reason a wait for a pacer that ended in err gives:
// none if the caller canceled it (the caller's doing, not the pacer's
// refusal), else the pacer's.
func callersEnd(reason string, err error) string {
	if errors.Is(err, context.Canceled) {
		return ""
	}
	return reason
}

// record takes an attempt's result into the host's health and tells the
// controllers, once, with what its permit took (to each, what it took
// for it), and reports a transition one made: the permit is used. A
// failure of an attempt that started before an answer from the host is
// stale: it changes nothing. It reports whether the host is failing,
// after a failure.
func (g *Gate) record(t *Ticket, r Outcome) (failing bool) {
	hs := t.hs
	o := g.observe(t, r)
	if !g.paced && o.answered && o.probe == 0 && o.lent == 0 && (hs.ctl.Load() == nil || hs.circuit().quiet()) {
		// The success path: an answer from a host that has never failed
		// (no controls), or has nothing held, tells the controllers
		// nothing.
		t.p = permit{}
		return false
	}
	g.controlsOf(hs)
	p := t.p
	t.p = permit{}
	var ch change
	for i, c := range hs.list() {
		o.took = p.paced&(1<<i) != 0
		if x := c.observe(o); x.opened || x.closed {
			ch = x
		}
	}
	if ch.closed {
		hs.health.reset()
	}
	if ch.opened || ch.closed {
		g.report(t)
	}
	return !o.answered && hs.health.failing(o.now)
}

// observe takes an attempt's result into the host's health, and says what
// the controllers are told of it: an answer (lend: from a host that
// served no one, with a budget that owes nothing), a fresh failure (trip:
// one that opens the breaker), or nothing (a stale failure, a cancel);
// and, with pacers, how it went.
func (g *Gate) observe(t *Ticket, r Outcome) observation {
	hs := t.hs
	o := observation{retry: t.retry, probe: t.p.probe, replied: r.Status != 0}
	if t.p.lent {
		o.lent = t.p.chargedSec
	}
	o.at, o.now = g.endClock(t, r.Answered)
	if o.rtt = o.now - t.start; o.replied {
		t.answer = time.Duration(o.rtt)
	}
	switch {
	case r.Answered && g.s.Hedge && !t.retry:
		hs.latencies().record(cmp.Or(r.Latency, time.Duration(o.rtt)))
		fallthrough
	case r.Answered:
		o.outage = hs.health.outage(o.now) // a healthy host's: one load
		o.lend = o.outage && (g.budget == nil || g.budgetOf(hs).solvent())
		hs.health.answer(t.start, o.now)
		o.answered = true
	case r.Failed && !hs.health.stale(t.start):
		// A refused connection reached no application, but says that
		// the host serves no one: it counts, though it costs nothing.
		s := hs.health.fail(o.now, g.scoreCap)
		o.failed, o.failing = true, hs.health.failing(o.now)
		o.trip = g.breaker != nil && s >= int32(g.breaker.Threshold) && hs.health.lasted(o.now)
	}
	if g.paced {
		o.sent, o.canceled, o.rejected = r.Sent, r.Canceled, r.Rejected
		o.start = t.start
		if r.Header != nil {
			o.header, o.status, o.wall = r.Header, r.Status, o.at
		}
	}
	return o
}

// endClock reads the clock as t's attempt ends: time.Now with pacers,
// which read the wall clock (a quota's reset); none for a first attempt
// that a healthy host answered, without hedging (whose latencies need
// the end), whose start stands for its end (a request reads the clock
// once: the host's last answer is then an attempt's start, not its end,
// earlier by a round trip); otherwise one monotonic read, about half
// time.Now's cost, and no time.Time, which the breaker makes from it only
// past its lock-free check (it only compares and subtracts its times,
// which their monotonic readings decide).
func (g *Gate) endClock(t *Ticket, answered bool) (time.Time, int64) {
	switch {
	case g.paced:
		at := time.Now()
		return at, monoAt(at)
	case answered && !t.retry && !g.s.Hedge && t.hs.health.level() == 0:
		return time.Time{}, t.start
	}
	return time.Time{}, mono()
}

// report reports the breaker's transitions that no one has reported yet,
// in the order they happened: whoever reports holds the host's evMu, so
// that calls for one host come in order, never at once, and no
// controller's lock is held while they run.
func (g *Gate) report(t *Ticket) {
	hs := t.hs
	c := g.controlsOf(hs)
	c.evMu.Lock()
	defer c.evMu.Unlock()
	var buf [4]bool
	for range maxReports {
		evs := c.cb.takeEvents(buf[:0])
		if len(evs) == 0 {
			return
		}
		for _, open := range evs {
			var score int // the host's health score when it opened (the threshold); 0 when it closed
			if open {
				score = int(hs.health.level())
			}
			g.s.Notify(t.ctx, t.host(), open, score)
		}
	}
}

// maxReports bounds the rounds of one report: each reports what was
// queued since the last, which other attempts' transitions can refill
// only while the callbacks run.
const maxReports = 1 << 10
