// This file holds the retry budget (the public Budget), one of admission's controllers
// (admission.go): per host, retries may add a share of the first attempts sent
// over a sliding window, or a small floor a second while the host is not
// failing. Every retry that is sent is charged, whichever way it leaves.

package admission

import (
	"math"
	"sync/atomic"
	"time"
)

const (
	budgetBuckets = 10 // one a second: a sliding window of about 10 s
	budgetWindow  = budgetBuckets * time.Second
	// floorSpan is the shortest span, in seconds, over which the floor
	// counts: minPerSecond × 3 retries may go in any 3 s, so that a quiet
	// client's burst of a few parallel requests can retry at once, but a
	// sequential caller cannot draw the window's whole floor in an instant.
	floorSpan = 3
)

// A Share is the retry budget's allowance, per host: the public Budget.
// The zero Share allows no retries at all; Init sets it. It is safe for
// concurrent use, and may be shared by several Gates, unless it is owned
// (Own).
type Share struct {
	ratio     float64
	perSecond float64
	span      int     // seconds over which the floor counts
	floor     float64 // perSecond × span
	// own: the Share is one Gate's alone (a Transport's default budget),
	// which keeps the per-host counts in its own host states; hosts is
	// then empty. claimed: a Gate has taken it (an own Share may have
	// only one).
	own     bool
	claimed atomic.Bool
	hosts   hostMap[budgetCounts]
}

// Init sets b to let retries to each host reach ratio × its first
// attempts over budgetWindow, or minPerSecond retries a second while the
// host is not failing: both finite and >= 0.
func (b *Share) Init(ratio, minPerSecond float64) {
	span := floorSpan
	if minPerSecond > 0 && minPerSecond*floorSpan < 1 {
		span = int(min(math.Ceil(1/minPerSecond), budgetBuckets))
	}
	b.ratio, b.perSecond, b.span, b.floor = ratio, minPerSecond, span, minPerSecond*float64(span)
	b.hosts.evictable = func(h *budgetCounts) bool { return h.refs.Load() == 0 }
	b.hosts.borrowed = true // a Gate's key, which holds the host once
}

// Own makes b one Gate's alone: the one Gate it is given to counts each
// host's first attempts and retries in its own host states, in one map
// with the rest of the host's state, not in b's. Hosts and Allows then
// see none of them. A Share that others may reach, or that is given to
// several Gates, must not be owned.
func (b *Share) Own() { b.own = true }

// room reports whether host's budget has room for one more retry, with
// the floor or without it.
func (b *Share) room(h *hostBudget, sec int64, floor bool) bool {
	return b.fits(h, sec, floor, 1, 1)
}

// shedPart is the part of the share that a sheddable retry may fill: the
// rest is kept for the default and critical ones.
const shedPart = 0.5

// fits reports whether the retries counted now plus add fit part of the
// share or, with floor, the floor.
func (b *Share) fits(h *hostBudget, sec int64, floor bool, add, part float64) bool {
	r := &h.retried().buckets
	if sum(r, sec, budgetBuckets)+add <= part*b.ratio*h.firstsIn(sec, budgetBuckets) {
		return true
	}
	return floor && sum(r, sec, b.span)+add <= b.floor
}

// allow reports whether host's budget has room for one more retry in part
// of the share, or in the floor, and, if it has, spends it. The admission is one
// compare-and-swap on the current second's bucket, made only if the counts
// it saw still leave room, so that goroutines deciding at the same instant
// cannot overshoot the limit together.
func (b *Share) allow(h *hostBudget, sec int64, floor bool, part float64) bool {
	if !b.fits(h, sec, floor, 1, part) {
		return false
	}
	cur := &h.counting().buckets[uint64(sec)%budgetBuckets]
	epoch := uint64(uint32(sec))
	for {
		old := cur.Load()
		next := epoch<<32 | 1
		if old>>32 == epoch {
			next = old + 1
		}
		if !b.fits(h, sec, floor, 1, part) {
			return false
		}
		if cur.CompareAndSwap(old, next) {
			return true
		}
	}
}

// refund gives back a retry spent in second sec that was never sent, if
// its bucket still counts that second.
func (b *Share) refund(h *hostBudget, sec int64) {
	cur := &h.retried().buckets[uint64(sec)%budgetBuckets]
	epoch := uint64(uint32(sec))
	for {
		old := cur.Load()
		if old>>32 != epoch || uint32(old) == 0 || cur.CompareAndSwap(old, old-1) {
			return
		}
	}
}

// budgetCtl is the budget's controller for one host: it counts first
// attempts and charges every retry, probe and hedge that goes.
//
//   - first attempts: counted, never refused.
//   - a retry, probe or hedge: charged if it fits the share, or the floor
//     while the host is not failing; otherwise refused, reason budget. A
//     sheddable one fits only half of the share (the floor is the same),
//     and none of it for 1 to 2 s after the share had no room for a
//     default or critical one: they go first, and the sheddable have
//     what they leave. It
//     holds none: the floor is withdrawn from a failing host, not lent to
//     it later, and whether a refused retry may wait for an outage's end
//     is the gate's to say (retry.go).
//
// It observes nothing: the host's health is the gate's.
type budgetCtl struct {
	b *Share
	h *hostBudget // the host's counts, in its host state
}

func (c *budgetCtl) admit(a query) verdict {
	h := c.h
	switch a.kind {
	case kindSend:
		return send // a retry charged already, about to be sent
	case kindFirst:
		if !a.charged {
			c.countFirst(a.sec)
		}
		return send
	}
	if a.free {
		return send // never reached the server: it costs it nothing
	}
	part := 1.0
	if a.level < 0 {
		part = shedPart
		if h.contestedAt(a.sec) {
			part = 0 // the floor only
		}
	}
	if c.b.allow(h, a.sec, a.healthy, part) {
		return verdict{act: actSend, permit: permit{charged: true, chargedSec: a.sec}}
	}
	if a.level >= 0 {
		r := h.counting()
		for old := r.contested.Load(); old < a.sec && !r.contested.CompareAndSwap(old, a.sec); old = r.contested.Load() {
		}
	}
	return refuse(reasonBudget)
}

// idle: the counts go with the host state, or are the shared Budget's,
// kept as long as they are pointed to (detach).
func (c *budgetCtl) idle(int64) bool { return true }

// attach points h at b's entry for host, in second sec: b is shared (an
// owned Share's counts are kept in h itself).
func (h *hostBudget) attach(b *Share, host string, sec int64) {
	e := b.hosts.getKey(host, nil, sec)
	e.refs.Add(1)
	h.more.Store(e)
}

// detach lets go of b's entry: the host is forgotten, and the shared
// Budget's entry may go once no one points to it.
func (h *hostBudget) detach(b *Share) {
	if m := h.more.Load(); !b.own && m != nil {
		m.refs.Add(-1)
	}
}

// room reports whether the share (not the floor) has room for a retry in
// second sec.
func (c *budgetCtl) room(sec int64) bool { return c.b.room(c.h, sec, false) }

// countFirst counts a first attempt in second sec, and repays one of
// what a recovery lent. With no budget, it does nothing.
func (c *budgetCtl) countFirst(sec int64) {
	if c.b != nil {
		c.h.countFirst(sec, c.b.own)
	}
}

// solvent reports whether what the last recovery lent has been repaid, so
// that a new one may lend.
func (c *budgetCtl) solvent() bool { return c.b.ratio > 0 && c.h.retried().owed.Load() <= 0 }

// lend charges a retry that a recovery releases beyond the share: it is
// counted among the retries (the share has no room for 10 s), and owed,
// 1/ratio first attempts, so that until they are sent no recovery lends
// again; unless the host answers it (observe): then it is given back
// whole, neither counted nor owed. Over any span, then, the lent retries
// that the host did not answer are at most ratio × the first attempts
// sent before the latest loan began, plus that loan; those it answered
// are at most one a request, for an answer ends it. A host that flaps,
// down and up in turn, and answers what each recovery releases (a run of
// blips) is lent at every recovery; one that the released retries find
// down again, once per 1/ratio × those that failed; an overload, which
// never serves no one, never.
func (c *budgetCtl) lend(sec int64) {
	r := c.h.counting()
	bucketAdd(&r.buckets[uint64(sec)%budgetBuckets], sec)
	r.owed.Add(int64(math.Ceil(1 / c.b.ratio)))
}

// giveBack gives back the charge of a retry that is not sent; one that a
// recovery lent owes nothing.
func (c *budgetCtl) giveBack(t permit, _ time.Time) {
	if t.charged {
		c.b.refund(c.h, t.chargedSec)
	}
	if t.lent {
		c.repay()
	}
}

// observe gives back whole a lent retry that the host answered: it is
// no longer counted among the retries, and owes nothing (repay).
func (c *budgetCtl) observe(o observation) change {
	if o.lent != 0 && o.answered {
		c.b.refund(c.h, o.lent)
		c.repay()
	}
	return change{}
}

// repay takes back what lend made one retry owe: the host answered it
// (the recovery held, and the retry was served, not turned away), or it
// was never sent. What a lent retry that failed owes stays, to be repaid
// by first attempts: a recovery that its own retries knock over lends
// again only once per 1/ratio × what failed.
func (c *budgetCtl) repay() {
	r := c.h.retried()
	k := int64(math.Ceil(1 / c.b.ratio))
	for {
		o := r.owed.Load()
		if o <= 0 || r.owed.CompareAndSwap(o, max(o-k, 0)) {
			return
		}
	}
}

// Settings are b's ratio and floor.
func (b *Share) Settings() (ratio, minPerSecond float64) { return b.ratio, b.perSecond }

// Hosts is how many hosts b counts.
func (b *Share) Hosts() int { return b.hosts.len() }

// Allows reports whether b has room for a retry to host in Unix second
// sec, the floor included: it spends it.
func (b *Share) Allows(host string, sec int64) bool {
	var h hostBudget
	h.more.Store(b.hosts.get(host))
	return b.allow(&h, sec, true, 1)
}
