// This file holds the Ticket, one request's admission state, and what
// the Transport may ask of it.

package admission

import (
	"context"
	"time"
)

// A Ticket is one request's admission state: what the Gate's methods are
// given, in place of the request. The caller sets Ctx, its ends
// (CtxEnd, MaxElapsedEnd: read once, they answer every question of the
// time left), FirstFail, Owned and Repeat; the rest is the Gate's.
type Ticket struct {
	Ctx           context.Context // the request's
	CtxEnd        time.Time       // its context's deadline, zero if none
	MaxElapsedEnd time.Time       // when WithMaxElapsed ends it, zero if never
	FirstFail     time.Time       // when its first attempt failed
	Owned         bool            // a layer above owns its schedule: none of its retries is held
	Repeat        bool            // it is itself a layer above's retry: charged as one
	WasHeld       bool            // a retry of it was held
	hs            *hostState      // the host's admission state
	p             permit          // the permit of the attempt to come, or in flight: what the controllers took for it
	start         int64           // mono: when the attempt in flight started
	sec           int64           // the Unix second the request began in
	retry         bool            // the attempt in flight is a retry or a probe
	answer        time.Duration   // how long its last answered attempt took, whatever the status; 0 if none
}

// question is a new question of kind kd about t's host, now: whether the
// host is failing, and by when (mono) the attempt must have gone, the
// sooner of the context's deadline and WithMaxElapsed's end, 0 if
// neither.
func (t *Ticket) question(kd kind) ask {
	now := time.Now()
	m := monoAt(now)
	a := ask{kind: kd, sec: secondOf(m), healthy: !t.hs.health.failing(m), now: m, at: now}
	if end := t.End(); !end.IsZero() {
		a.deadline = m + max(int64(end.Sub(now)), 1)
	}
	return a
}

// End is when the request must have ended: the sooner of its context's
// deadline and WithMaxElapsed's end, zero if neither.
func (t *Ticket) End() time.Time {
	if t.CtxEnd.IsZero() || (!t.MaxElapsedEnd.IsZero() && t.MaxElapsedEnd.Before(t.CtxEnd)) {
		return t.MaxElapsedEnd
	}
	return t.CtxEnd
}

// Known reports whether t's host is known: Enter found it.
func (t *Ticket) Known() bool { return t.hs != nil }

// Holds reports whether the attempt in flight holds something a panic in
// the base would leave taken: a probe, a pacer's slot, turn or quota
// (Abandon gives them back).
func (t *Ticket) Holds() bool { return t.p.probe != 0 || t.p.paced != 0 }

// Failing reports whether t's host is failing now.
func (t *Ticket) Failing() bool { return t.hs != nil && t.hs.health.failing(mono()) }

// Crowd reports whether t's retry is one of a crowd held together: 4 or
// more held whose requests first failed within 10ms of t's first failure.
func (t *Ticket) Crowd() bool { return t.hs.cb.crowd(t.FirstFail) }

// Latencies are t's host's recent latencies; nil without hedging.
func (t *Ticket) Latencies() *Latencies { return t.hs.lat }

// RetriedAbove is the Unix second a layer above last retried a request
// to t's host, 0 if never or the host is not known.
func (t *Ticket) RetriedAbove() int64 {
	if t.hs == nil {
		return 0
	}
	return t.hs.above.Load()
}

// NoteRetriedAbove notes that a layer above retried a request to t's
// host in Unix second sec.
func (t *Ticket) NoteRetriedAbove(sec int64) {
	if t.hs != nil {
		t.hs.above.Store(sec)
	}
}
