// This file holds Retry, the fourth call on a Ticket: what becomes of a
// retry that the ladder allows: charged and sent after its wait, held by
// the breaker until the host answers or its limit, paced, or given up.

package admission

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// A Wait is what Retry is told of a retry that the ladder allows.
type Wait struct {
	Delay  time.Duration // the ladder's wait before it
	Server time.Duration // of Delay, the server's own (Retry-After): a hold never cuts it
	Free   bool          // the failed attempt never reached the server: the retry is not charged
	// Keep, if set, is called once the retry is to wait or be held, not
	// when it is refused at once: the caller keeps what it returns if the
	// retry gives up after its wait.
	Keep func()
}

// An Answer is what became of a retry: it goes now (Reason and Err
// empty), or gives up (Reason), or its context ended its wait (Err; with
// reasonDeadline if its deadline came while a pacer made it wait).
type Answer struct {
	Reason string
	Err    error
	Held   bool // the breaker held it: its wait was what it took
}

// Retry takes a retry that the ladder allows through admission, which
// owns its wait: charged to the budget (unless it is free) and sent after
// its delay; held by the breaker until the host answers or its hold's
// limit; refused at once; or, its wait over, paced. Whatever a retry that
// does not go took is given back.
func (t *Ticket) Retry(w Wait) Answer {
	if t.hs == nil {
		if w.Keep != nil {
			w.Keep()
		}
		return Answer{Err: sleep(t.ctx, w.Delay)}
	}
	g := t.g
	g.controlsOf(t.hs) // a retry's host has failed: it has its controls
	held, reason := g.admitRetry(t, w.Free)
	if reason != "" {
		return Answer{Reason: reason}
	}
	if w.Keep != nil {
		w.Keep()
	}
	a := t.wait(held, w.Delay, w.Server)
	if a.Reason != "" || a.Err != nil {
		t.giveBack(t.p) // its charge, its probe
		return a
	}
	t.start, t.retry = mono(), true
	return a
}

// admitRetry asks the controllers for a retry that the ladder (decide.go)
// allows: it waits and goes (charged to the budget, unless it never
// reached the server), is held, or gives up now, without a wait.
func (g *Gate) admitRetry(t *Ticket, free bool) (held bool, reason string) {
	hs := t.hs
	a := t.question(kindRetry)
	m := a.now
	if !t.owned && hs.health.outage(m) && g.mayHold(hs, m) {
		return true, "" // the host serves no one: wait for it, uncharged
	}
	a.free = free
	v, _ := g.admit(t, a) // no controller asks a retry to wait before its own wait
	switch v.act {
	case actRefuse:
		return g.refused(t, v.reason, m)
	case actHold:
		if g.breaker == nil || t.owned {
			return false, reasonBudget // no queue to hold it in, or one a layer above owns: never held
		}
		return true, ""
	}
	return false, ""
}

// wait waits before the retry: for its delay, then past the breaker; or
// held by the breaker from the start. A held retry never goes before the
// server's wait (ra). Then the pacers are asked: one that refuses gives
// up, and so does a retry whose deadline comes while it waits for them.
func (t *Ticket) wait(held bool, delay, ra time.Duration) Answer {
	g := t.g
	var a Answer
	if !held {
		began := time.Now()
		if a.Err = sleep(t.ctx, delay); a.Err != nil {
			return a
		}
		a.Reason, held = g.afterWait(t)
		ra = max(ra-time.Since(began), 0)
		delay = 0
	}
	if held { // from the start, or the breaker opened meanwhile
		nb, limit := t.holdTimes(time.Now(), delay, ra)
		a.Reason, a.Err = g.hold(t, nb, limit)
		a.Held = true
	}
	if a.Reason != "" || a.Err != nil || !g.paced {
		return a
	}
	v, err := g.admit(t, t.question(kindSend))
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		a.Reason, a.Err = reasonDeadline, err
	case err != nil:
		a.Err = err
	default:
		a.Reason = v.reason
	}
	return a
}

// holdTimes are the earliest and the latest times a retry of t's request
// that waits delay, ra of it the server's, may go if held: the limit is
// its backoff schedule from the first failure (a random 80% to 100% of it
// while 4 or more are held), or MaxHold from now; but no sooner than the
// server's wait ends, and no later than WithMaxElapsed or the context
// deadline. It goes no sooner than its wait, cut to the limit.
func (t *Ticket) holdTimes(now time.Time, delay, ra time.Duration) (notBefore, limit time.Time) {
	b := t.g.breaker
	if t.span == 0 {
		// A crowd that failed together (a process's callers held in one
		// instant) is held a random 80% to 100% of the schedule, drawn
		// once per request, so that its callers do not all come back,
		// and fail again, together; any other retry, the whole schedule.
		t.span = b.Schedule
		if t.hs.circuit().crowd(t.firstFail) {
			t.span -= time.Duration(rand.Int64N(int64(b.Schedule/5) + 1))
		}
	}
	limit = t.firstFail.Add(t.span)
	if b.MaxHold > 0 {
		limit = now.Add(b.MaxHold)
	}
	if server := now.Add(ra); limit.Before(server) {
		limit = server
	}
	notBefore = now.Add(delay)
	if limit.Before(notBefore) {
		notBefore = limit
	}
	if end := t.end(); !end.IsZero() && end.Before(limit) {
		limit = end
	}
	return notBefore, limit
}

// sleep waits for d, or until ctx ends, and then returns ctx.Err().
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// refused is what becomes of a retry that a controller refused for
// reason at m: it gives up, unless the budget refused it while the host
// does not answer (an outage not yet sure: failures in an instant, or in
// a row for longer than the host's usual gap since its last answer) or a
// recovery is under way: then it is held, to go with the host's next
// answer, charged then. In an overload, whose answers come among its
// refusals, it gives up at once.
func (g *Gate) refused(t *Ticket, reason string, m int64) (held bool, _ string) {
	hs := t.hs
	h := &hs.health
	if reason == reasonBudget && !t.owned && (h.down(m) || h.unanswered(m) || hs.circuit().lends()) && g.mayHold(hs, m) {
		return true, ""
	}
	return false, reason
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
	case g.budget == nil || hs.circuit().lends() || g.budgetOf(hs).solvent():
		return true
	}
	return g.budgetOf(hs).room(secondOf(m))
}

// afterWait passes a retry whose wait has ended: if the breaker opened
// meanwhile, it is to be held (held), or, with FailFast, it goes only as
// the probe.
func (g *Gate) afterWait(t *Ticket) (reason string, held bool) {
	hs := t.hs
	if g.breaker == nil || t.p.probe != 0 {
		return "", false
	}
	if !hs.circuit().isOpen.Load() {
		if m := mono(); !hs.health.outage(m) || !g.mayHold(hs, m) {
			return "", false
		}
	}
	if t.owned {
		t.giveBack(t.p.charge())
		return reasonCircuitOpen, false // a layer above owns it: never held, back to it at once
	}
	if g.breaker.FailFast {
		v := hs.circuit().admit(t.question(kindProbe))
		if v.act == actRefuse {
			t.giveBack(t.p.charge())
			return v.reason, false
		}
		t.p.probe = v.probe
		return "", false
	}
	return "", true
}

// hold holds a retry in the breaker's queue until it may go (charged to
// the budget as it leaves), or gives up: at its limit (reasonBreaker, or
// reasonMaxElapsed past WithMaxElapsed), when due as the probe with its
// deadline nearer than the host's usual answer (reasonBreaker), or when
// the budget has no room for it as it leaves (reasonBudget). A context that ends first ends the
// hold with its error, unless its deadline is the limit.
func (g *Gate) hold(t *Ticket, notBefore, limit time.Time) (string, error) {
	hs := t.hs
	t.giveBack(t.p.charge())
	for range maxHoldTurns { // each pass is a probe that the budget did not let go, minProbeGap apart
		end, ticket, err := awaitHold(t, notBefore, limit)
		now := time.Now()
		switch {
		case err == context.DeadlineExceeded && !now.Before(limit):
			return reasonBreaker, nil // the deadline is the limit: give up with the last response
		case err != nil:
			return "", err
		case !t.elapsed.IsZero() && !now.Before(t.elapsed):
			hs.circuit().giveBack(permit{probe: ticket}, now)
			return reasonMaxElapsed, nil
		case end == holdGiveUp:
			return reasonBreaker, nil
		}
		if reason, again := g.leave(t, end, ticket); !again {
			return reason, nil
		}
	}
	return reasonBreaker, nil
}

// awaitHold holds t's retry in its host's circuit until its hold ends
// (see circuit.turn), or t's context ends: then with its error.
func awaitHold(t *Ticket, notBefore, limit time.Time) (holdEnd, uint64, error) {
	ctx, cb := t.ctx, t.hs.circuit()
	w := cb.enter(&holder{failed: t.firstFail, notBefore: notBefore, limit: limit, deadline: t.ctxEnd, answer: t.answer, level: t.level}, time.Now())
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
// gives up, reasonBudget.
func (g *Gate) leave(t *Ticket, end holdEnd, ticket uint64) (reason string, again bool) {
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
		hs.circuit().reprobe(ticket, time.Now())
		return "", true
	}
	return reasonBudget, false
}

// tell tells the simulator's hooks of a held retry that is sent: one
// released (lent: beyond the budget's share), or the probe.
func (g *Gate) tell(t *Ticket, end holdEnd, lent bool) {
	switch {
	case end == holdReleased && g.s.OnRelease != nil:
		g.s.OnRelease(t.host(), lent)
	case end == holdProbe && g.s.OnProbe != nil:
		g.s.OnProbe(t.ctx, t.host())
	}
}

// charge asks the budget for a retry leaving its hold as end says, and
// lends beyond the share to one that a recovery released (lent).
func (g *Gate) charge(t *Ticket, end holdEnd) (v verdict, lent bool) {
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
		(end == holdProbe && hs.circuit().holding() >= crowdSize)
	bud := g.budgetOf(hs)
	v = bud.admit(a)
	if v.act != actSend && end == holdReleased && hs.circuit().borrow() {
		bud.lend(a.sec) // released by a recovery, beyond the share
		return verdict{act: actSend, permit: permit{charged: true, chargedSec: a.sec, lent: true}}, true
	}
	return v, false
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
