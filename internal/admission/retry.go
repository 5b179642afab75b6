// This file holds what becomes of a retry that the ladder allows: charged
// and sent after its wait, held by the breaker until the host answers or
// its limit, or given up; and of a hedge, which the same controllers
// judge.

package admission

import (
	"context"
	"time"
)

// Next is what becomes of a retry that the ladder allows.
type Next uint8

const (
	NextWait Next = iota // wait for the delay, then send
	NextHold             // hold until it may go, or its limit
)

// AdmitRetry asks the controllers for a retry that the ladder (decide.go)
// allows: it waits and goes (charged to the budget, unless it never
// reached the server), is held, or gives up now, without a wait.
func (g *Gate) AdmitRetry(t *Ticket, free bool) (Next, Reason) {
	hs := t.hs
	if hs == nil {
		return NextWait, ""
	}
	a := t.question(kindRetry)
	m := a.now
	if !t.Owned && hs.health.outage(m) && g.mayHold(hs, m) {
		return NextHold, "" // the host serves no one: wait for it, uncharged
	}
	a.free = free
	v, _ := g.admit(t, a) // no controller asks a retry to wait before its own wait
	switch v.act {
	case actRefuse:
		return g.refused(t, v.reason, m)
	case actHold:
		if g.breaker == nil || t.Owned {
			return NextWait, ReasonBudget // no queue to hold it in, or one a layer above owns: never held
		}
		return NextHold, ""
	}
	return NextWait, ""
}

// refused is what becomes of a retry that a controller refused for
// reason at m: it gives up, unless the budget refused it while the host
// does not answer (an outage not yet sure: failures in an instant, or in
// a row for longer than the host's usual gap since its last answer) or a
// recovery is under way: then it is held, to go with the host's next
// answer, charged then. In an overload, whose answers come among its
// refusals, it gives up at once.
func (g *Gate) refused(t *Ticket, reason Reason, m int64) (Next, Reason) {
	hs := t.hs
	h := &hs.health
	if reason == ReasonBudget && !t.Owned && (h.down(m) || h.unanswered(m) || hs.cb.lends()) && g.mayHold(hs, m) {
		return NextHold, ""
	}
	return NextWait, reason
}

// mayHold reports whether a retry to hs may be held at m for the host's
// recovery: the breaker holds retries (it is on, and not FailFast), and
// something will pay for the retry when the recovery releases it: no
// budget, a recovery under way that may still lend, a budget that owes
// nothing (the recovery will lend), or the share's room now. Otherwise
// it gives up at once: the budget never makes a caller wait for a retry
// that will not be sent.
func (g *Gate) mayHold(hs *hostState, m int64) bool {
	switch {
	case g.breaker == nil || g.breaker.FailFast:
		return false
	case g.budget == nil || hs.cb.lends() || hs.bud.solvent():
		return true
	}
	return hs.bud.room(secondOf(m))
}

// AfterWait passes a retry whose wait has ended: if the breaker opened
// meanwhile, it is to be held (held: the caller holds it, g.hold), or,
// with FailFast, it goes only as the probe.
func (g *Gate) AfterWait(t *Ticket) (reason Reason, held bool) {
	hs := t.hs
	if hs == nil || g.breaker == nil || t.p.probe != 0 {
		return "", false
	}
	if !hs.cb.opened() {
		if m := mono(); !hs.health.outage(m) || !g.mayHold(hs, m) {
			return "", false
		}
	}
	if t.Owned {
		g.Refund(t)
		return ReasonCircuitOpen, false // a layer above owns it: never held, back to it at once
	}
	if g.breaker.FailFast {
		v := hs.cb.admit(t.question(kindProbe))
		if v.act == actRefuse {
			g.Refund(t)
			return v.reason, false
		}
		t.p.probe = v.probe
		return "", false
	}
	return "", true
}

// Hold holds a retry in the breaker's queue until it may go (charged to
// the budget as it leaves), or gives up: at its limit (ReasonBreaker, or
// ReasonMaxElapsed past WithMaxElapsed), when due as the probe with its
// deadline nearer than the host's usual answer (ReasonBreaker), or when
// the budget has no room for it as it leaves (ReasonBudget). A context that ends first ends the
// hold with its error, unless its deadline is the limit.
func (g *Gate) Hold(t *Ticket, notBefore, limit time.Time) (Reason, error) {
	hs := t.hs
	g.Refund(t)
	t.WasHeld = true
	for range maxHoldTurns { // each pass is a probe that the budget did not let go, minProbeGap apart
		end, ticket, err := awaitHold(t, notBefore, limit)
		now := time.Now()
		switch {
		case err == context.DeadlineExceeded && !now.Before(limit):
			return ReasonBreaker, nil // the deadline is the limit: give up with the last response
		case err != nil:
			return "", err
		case !t.MaxElapsedEnd.IsZero() && !now.Before(t.MaxElapsedEnd):
			hs.cb.undo(permit{probe: ticket}, now)
			return ReasonMaxElapsed, nil
		case end == holdGiveUp:
			return ReasonBreaker, nil
		}
		if reason, again := g.leave(t, end, ticket); !again {
			return reason, nil
		}
	}
	return ReasonBreaker, nil
}

// awaitHold holds t's retry in its host's circuit until its hold ends
// (see circuit.turn), or t's context ends: then with its error.
func awaitHold(t *Ticket, notBefore, limit time.Time) (holdEnd, uint64, error) {
	ctx, cb := t.Ctx, &t.hs.cb
	w := cb.enter(&holder{failed: t.FirstFail, notBefore: notBefore, limit: limit, deadline: t.CtxEnd, answer: t.answer}, time.Now())
	for range maxHoldTurns { // each turn waits for an event or a timer
		now := time.Now()
		end, ticket, done, next, changed := cb.turn(w, now)
		if done {
			return end, ticket, nil
		}
		if err := await(ctx, changed, w.woken(), max(next.Sub(now), 0)); err != nil {
			cb.quit(w, time.Now())
			return holdGiveUp, 0, err
		}
	}
	cb.quit(w, time.Now())
	return holdGiveUp, 0, nil // never reached in practice
}

// leave charges a retry that leaves its hold to the budget. A probe that
// the budget has no room for goes back in the hold (again); any other
// gives up, ReasonBudget.
func (g *Gate) leave(t *Ticket, end holdEnd, ticket uint64) (reason Reason, again bool) {
	hs := t.hs
	v, lent := g.charge(t, end)
	if v.act == actSend {
		g.tell(t, end, lent)
	}
	switch {
	case v.act == actSend:
		t.p = t.p.with(v.permit)
		t.p.probe = ticket
		return "", false
	case end == holdProbe:
		hs.cb.reprobe(ticket, time.Now())
		return "", true
	}
	return ReasonBudget, false
}

// tell tells the simulator's hooks of a held retry that is sent: one
// released (lent: beyond the budget's share), or the probe.
func (g *Gate) tell(t *Ticket, end holdEnd, lent bool) {
	switch {
	case end == holdReleased && g.s.OnRelease != nil:
		g.s.OnRelease(t.hs.host, lent)
	case end == holdProbe && g.s.OnProbe != nil:
		g.s.OnProbe(t.Ctx, t.hs.host)
	}
}

// charge asks the budget for a retry leaving its hold as end says, and
// lends beyond the share to one that a recovery released (lent).
func (g *Gate) charge(t *Ticket, end holdEnd) (v verdictOf, lent bool) {
	if g.budget == nil {
		return send, false
	}
	hs := t.hs
	kd := kindLeave
	if end == holdProbe {
		kd = kindProbe
	}
	a := t.question(kd)
	// Released: the host has answered, the floor is back. At its limit
	// with no retry seen failing: failed first attempts say nothing of
	// retries, and it goes as a release does. The probe of
	// a crowd (a process's many callers held together): the floor too,
	// so that its callers learn of the recovery within a probe's gap,
	// not when the share next has room; one instance of a fleet, with a
	// few held, probes on its share alone.
	a.healthy = a.healthy || end == holdReleased || end == holdGo ||
		(end == holdProbe && hs.cb.holding() >= crowdSize)
	v = hs.bud.admit(a)
	if v.act != actSend && end == holdReleased && hs.cb.borrow() {
		hs.bud.lend(a.sec) // released by a recovery, beyond the share
		return verdictOf{act: actSend, permit: permit{charged: true, chargedSec: a.sec, lent: true}}, true
	}
	return v, false
}

// MayHedge asks for a hedge: none while the host's breaker is open or
// retries are held; each one spends the budget, and a pacer that would
// take a turn, quota or slot for it refuses it (a copy takes none).
func (g *Gate) MayHedge(t *Ticket) bool {
	hs := t.hs
	if hs.cb.opened() || hs.cb.holding() > 0 {
		return false
	}
	a := t.question(kindHedge)
	for i, c := range hs.ctls {
		if v := c.admit(a); v.act != actSend {
			for _, d := range hs.ctls[:i] {
				d.undo(permit{charged: true, chargedSec: a.sec}, a.at) // the budget's charge, if it took one
			}
			return false
		}
	}
	return true
}

// Refund gives back the charge of a retry that was never sent.
func (g *Gate) Refund(t *Ticket) {
	if t.p.charged && t.hs != nil && g.budget != nil {
		t.hs.bud.undo(permit{charged: true, chargedSec: t.p.chargedSec, lent: t.p.lent}, time.Time{})
	}
	t.p.charged, t.p.chargedSec, t.p.lent = false, 0, false
}

// await waits for a change, a wake, d (none if d < 0), or the end of
// ctx.
func await(ctx context.Context, changed, wake <-chan struct{}, d time.Duration) error {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-changed:
	case <-wake:
	case <-timeout:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Pace asks the pacers whether a retry, its wait over, goes now: "" when
// it may, once every wait asked for has passed; otherwise why not, or the
// context's error if it ended during a wait.
func (g *Gate) Pace(t *Ticket) (Reason, error) {
	v, err := g.admit(t, t.question(kindSend))
	return v.reason, err
}
