// This file holds the Ticket, one request's admission, and three of the
// four calls the Transport makes on it: First before its first attempt,
// Done as each attempt ends, and Hedge before a hedged copy (Retry, the
// fourth, is retry.go's).

package admission

import (
	"context"
	"time"
)

// A Ticket is one request's admission state. Its zero value is ready for
// First; the Transport asks it nothing else, and reads nothing of it but
// what its four calls return.
type Ticket struct {
	g         *Gate
	hs        *hostState // the host's admission state; nil without a Gate
	ctx       context.Context
	scheme    string        // the request's URL's scheme and host, as given:
	rawHost   string        // its host's canonical name is made of them when it is told (host)
	ctxEnd    time.Time     // its context's deadline, zero if none
	elapsed   time.Time     // when WithMaxElapsed ends it, zero if never
	firstFail time.Time     // when its first attempt failed
	span      time.Duration // how long after firstFail a retry of it may be held; 0 until drawn
	owned     bool          // a layer above owns its schedule: none of its retries is held
	p         permit        // the permit of the attempt to come, or in flight: what the controllers took for it
	start     int64         // mono: when the attempt in flight started
	sec       int64         // the Unix second the request began in
	retry     bool          // the attempt in flight is a retry or a probe
	level     int8          // its criticality: -1 sheddable, 0 default, 1 critical
	answer    time.Duration // how long its last answered attempt took, whatever the status; 0 if none
}

// A Request is what First is told of a request.
type Request struct {
	Ctx           context.Context
	Scheme, Host  string
	CtxEnd        time.Time // its context's deadline, zero if none
	MaxElapsedEnd time.Time // when WithMaxElapsed ends it, zero if never
	Owned         bool      // a layer above owns its schedule: a retry of it is never held
	Repeat        bool      // it is itself a layer above's retry: charged to the budget as one
	// Level is its criticality: -1 sheddable, 0 default, 1 critical. Once
	// the host fails or is overloaded, the lower yields first (see
	// "Criticality" in docs/overload.md); on a healthy host it changes
	// nothing.
	Level int8
	// Hedge, with hedging, is the percentile of the host's recent
	// latencies after which a copy may go, which First returns.
	Hedge float64
}

// First admits r's first attempt through g (none: nothing to ask), on
// a zero Ticket: it finds the host, notes when the attempt starts (the
// request's one clock read on its success path) and asks the
// controllers. The budget counts it; only FailFast refuses one, while
// the host's breaker is open, and the pacers may make it wait or refuse
// it. It returns why the attempt may not go, or the context's error if it
// ended while the attempt waited for a pacer; and, with r.Hedge, the
// host's latency after which a hedged copy may go (0: none known yet).
func (t *Ticket) First(g *Gate, r *Request) (hedgeAfter time.Duration, reason string, err error) {
	t.g, t.ctx, t.ctxEnd, t.elapsed, t.owned, t.level = g, r.Ctx, r.CtxEnd, r.MaxElapsedEnd, r.Owned, r.Level
	t.scheme, t.rawHost = r.Scheme, r.Host
	if g == nil {
		return 0, "", nil
	}
	var buf [maxHostKey]byte
	key, kb := canonicalHost(r.Scheme, r.Host, &buf)
	t.start = mono()
	t.sec = secondOf(t.start)
	hs := g.hosts.getKey(key, kb, t.sec)
	t.hs = hs
	if r.Repeat {
		g.chargeRepeat(t)
	}
	if !g.paced && !hs.circuit().isOpen.Load() {
		// The success path: while the breaker is closed, only the budget
		// has anything to do with a first attempt (count it), and it
		// refuses none; asked directly, it costs no dispatch.
		if b := g.budget; b != nil && !t.p.charged {
			hs.bud.countFirst(t.sec, b.own)
		}
	} else if reason, err = g.admitFirst(t); reason != "" || err != nil {
		return 0, reason, err
	}
	if r.Hedge > 0 && g.s.Hedge {
		hedgeAfter = hs.latencies().percentile(r.Hedge)
	}
	return hedgeAfter, "", nil
}

// Done takes how the attempt in flight ended into the host's health and
// tells the controllers, once, with what its permit took. It reports
// whether the host is failing, after a failure (false after an answer).
// An attempt whose base panicked (o.Panicked) tells nothing: what it took
// is given back, all but its budget charge, for it may have reached the
// host.
func (t *Ticket) Done(o *Outcome) (failing bool) {
	hs := t.hs
	switch {
	case hs == nil:
		return false
	case o.Panicked:
		t.giveBack(t.p.pacedOnly())
		return false
	case o.Answered && !t.retry && !t.g.paced && !t.g.s.Hedge && t.p.probe == 0 && !t.p.lent &&
		hs.health.level() == 0 && (hs.ctl.Load() == nil || hs.circuit().quiet()):
		// The success path: a first attempt that a healthy host answered,
		// without pacers or hedging, tells the controllers nothing (the
		// Gate's record says why) and reads no clock: its start stands
		// for its end (endClock).
		hs.health.answer(t.start, t.start)
		t.p = permit{}
		return false
	}
	failing = t.g.record(t, *o)
	if !o.Answered && t.firstFail.IsZero() {
		t.firstFail = time.Now()
	}
	return failing
}

// Hedge asks for a hedged copy of the first attempt: none while the
// host's breaker is open or retries are held; each one spends the
// budget, and a pacer that would take a turn, quota or slot for it
// refuses it (a copy takes none).
func (t *Ticket) Hedge() bool {
	hs := t.hs
	if hs == nil {
		return false
	}
	if cb := &t.g.controlsOf(hs).cb; cb.isOpen.Load() || cb.holding() > 0 {
		return false
	}
	a := t.question(kindHedge)
	for i, c := range hs.list() {
		if v := c.admit(a); v.act != actSend {
			for _, d := range hs.list()[:i] {
				d.giveBack(permit{charged: true, chargedSec: a.sec}, a.at) // the budget's charge, if it took one
			}
			return false
		}
	}
	return true
}

// host is the canonical name of t's host, as its state is keyed: for
// breaker events and the simulator's hooks, which are told it seldom, so
// that no host state keeps it twice.
func (t *Ticket) host() string {
	var buf [maxHostKey]byte
	key, b := canonicalHost(t.scheme, t.rawHost, &buf)
	if b != nil {
		return string(b)
	}
	return key
}

// question is a new question of kind kd about t's host, now: whether the
// host is failing, and by when (mono) the attempt must have gone, the
// sooner of the context's deadline and WithMaxElapsed's end, 0 if
// neither.
func (t *Ticket) question(kd kind) query {
	now := time.Now()
	m := monoAt(now)
	a := query{kind: kd, sec: secondOf(m), healthy: !t.hs.health.failing(m), now: m, at: now, level: t.level}
	if !t.ctxEnd.IsZero() || !t.elapsed.IsZero() {
		a.deadline = m + max(int64(t.end().Sub(now)), 1)
	}
	return a
}

// end is when the request must have ended: the sooner of its context's
// deadline and WithMaxElapsed's end, zero if neither.
func (t *Ticket) end() time.Time {
	if t.ctxEnd.IsZero() || (!t.elapsed.IsZero() && t.elapsed.Before(t.ctxEnd)) {
		return t.elapsed
	}
	return t.ctxEnd
}

// giveBack gives back p, what the controllers took for an attempt that is
// not sent (or whose base panicked), and takes it out of t's permit.
func (t *Ticket) giveBack(p permit) {
	if t.hs != nil && p != (permit{}) {
		now := time.Now()
		for i, c := range t.hs.list() {
			c.giveBack(p.of(i), now)
		}
	}
	t.p = t.p.without(p)
}
