// This file holds the retry breaker's configuration and its controller:
// one circuit per host, closed or open, with the queue of held retries, the
// probe schedule and the ramp that lets held retries go once the host
// answers. The Gate (admission.go) asks it, among the other controllers.

package admission

import (
	"sync"
	"sync/atomic"
	"time"
)

// A probe that hangs counts as failed after probeTimeoutFactor times its
// own interval, and no sooner than minProbeTimeout.
const (
	probeTimeoutFactor = 4
	minProbeTimeout    = 100 * time.Millisecond
)

// circuit is the breaker's controller for one host. Its rules:
//
//   - opens at Threshold over 10ms; any fresh answer closes it.
//   - open: retries held (FailFast: refused, first attempts too), but one probe a host at a time.
//   - probes: ProbeBackoff after the last failure, sooner the more are held.
//   - an answer puts the held onto a ramp: one goes at once, more as they are answered, each by its turn.
//   - a host that turns a fifth of them away is let back to slowly: one per 4 first attempts answered.
//   - at its limit a held retry gives up if a retry failed since the last answer, or in a slowed recovery; else it goes.
//   - one due as the probe gives up if its deadline is within the host's usual answer time.
//
// Its state is guarded by mu; open and the number held are mirrored in
// atomics for the lock-free read on every attempt.
type circuit struct {
	cfg     *Breaker
	tickets *atomic.Uint64 // the gate's: names probes, so that a late answer ends only its own

	isOpen atomic.Bool
	nHeld  atomic.Int32 // held, ramping and granted retries, until they leave

	mu        sync.Mutex
	open      bool
	changed   chan struct{} // closed, and replaced, when every held retry should look again
	probing   uint64        // the ticket of the probe in flight, 0 if none
	probeEnd  time.Time     // when the probe in flight counts as failed
	probes    int           // probes failed since the breaker opened or retries were first held
	prevProbe time.Duration
	nextProbe time.Time
	refused   int       // FailFast: requests refused since the last probe
	events    []bool    // transitions not yet reported, oldest first (true: opened)
	held      []*holder // retries held now, oldest first
	recovery            // the release under way (release.go)
	// retryFailed: a retry or a probe has failed since the host last
	// answered. Until one has, the failures are first attempts only, which
	// say nothing of whether a retry would succeed (requests that each
	// fail once, as a test's fake does): a held retry at its limit then
	// goes instead of giving up.
	retryFailed atomic.Bool
	// usual is how long the host usually takes to answer (latency.go),
	// 0 until it has answered while the circuit was told.
	usual time.Duration
}

// holder is one held retry.
type holder struct {
	since     time.Time // when it was held
	failed    time.Time // when its request's first attempt failed
	notBefore time.Time // its own wait ends: it is never sent earlier
	limit     time.Time
	deadline  time.Time     // its request's context deadline, zero if none
	answer    time.Duration // how long its request's last answer took, 0 if none
	wake      chan struct{}
	state     holdState
	turn      time.Time // ramping: when it goes at the latest
	epoch     uint64    // granted: the circuit's epoch then
	level     int8      // its request's criticality: a release lets the higher go first
}

type holdState uint8

// woken is closed when something the holder waits for happens to it.
func (w *holder) woken() <-chan struct{} { return w.wake }

const (
	holdWaiting holdState = iota
	holdRamping
	holdGranted
	holdGone // it left: released, or as the probe, or at its limit
)

// holdEnd is how a hold ended.
type holdEnd uint8

const (
	holdReleased holdEnd = iota // the host answered: go
	holdProbe                   // go as the probe (its ticket returned)
	holdGiveUp                  // its limit, after a retry or probe failed; or due as the probe, too near its deadline
	holdGo                      // its limit, no retry seen failing: go
)

// crowdSize and crowdWindow make a crowd: that many held retries whose
// requests first failed within crowdWindow of each other failed together
// (a process's callers that all failed in one instant), and would come
// back together at the end of their schedules.
const (
	crowdSize   = 4
	crowdWindow = 10 * time.Millisecond
)

// crowd reports whether a retry of a request that first failed at failed
// joins a crowd: crowdSize - 1 others held whose requests first failed
// within crowdWindow of it.
func (cb *circuit) crowd(failed time.Time) bool {
	if cb.nHeld.Load() < crowdSize-1 {
		return false
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	n := 0
	for _, w := range cb.held {
		if d := w.failed.Sub(failed); d < crowdWindow && d > -crowdWindow {
			if n++; n == crowdSize-1 {
				return true
			}
		}
	}
	return false
}

// minProbeGap bounds how close the probes come when many retries are held.
const minProbeGap = 20 * time.Millisecond

// failFastEvery makes every failFastEvery-th request that an open FailFast
// breaker would refuse its probe, if the probe backoff has not come first:
// probes follow the traffic, a sixth of it at most.
const failFastEvery = 6

func (cb *circuit) admit(a query) verdict {
	if a.kind == kindSend || !cb.isOpen.Load() {
		return send
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	now := a.at
	cb.expire(now)
	switch {
	case !cb.open:
		return send
	case !cb.cfg.FailFast:
		if a.kind == kindFirst {
			return send
		}
		return hold
	case cb.probing == 0 && (!now.Before(cb.nextProbe) || (a.kind == kindFirst && cb.refused >= failFastEvery-1)):
		return verdict{act: actSend, permit: permit{probe: cb.claim(now)}}
	}
	if a.kind == kindFirst {
		cb.refused++
	}
	return refuse(reasonCircuitOpen)
}

// giveBack gives back a probe claimed for an attempt that was not sent.
func (cb *circuit) giveBack(t permit, now time.Time) {
	if t.probe != 0 {
		cb.mu.Lock()
		cb.ended(t.probe, now)
		cb.mu.Unlock()
	}
}

// observe takes a fresh outcome, at o.at (none: at o.now, made a time
// only past the lock-free check that nothing moves); it reports a
// transition, if one happened, and queues it for the Gate to report
// (takeEvents). It keeps retryFailed first, without a lock: set by a
// failed retry or probe, cleared by an answer, written only when it
// changes.
func (cb *circuit) observe(o observation) change {
	if !o.answered && !o.failed && o.probe == 0 {
		return change{}
	}
	if f := o.failed && o.retry; (f || o.answered) && cb.retryFailed.Load() != f {
		cb.retryFailed.Store(f)
	}
	if cb.unmoved(o) {
		return change{} // a healthy host's answer, or a failure that opens nothing: no lock
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if o.replied {
		cb.noteAnswer(time.Duration(o.rtt))
	}
	at := o.at
	if at.IsZero() {
		at = timeAt(o.now) // the Gate read the monotonic clock only
	}
	ch := cb.observeLocked(o, at)
	if ch.opened || ch.closed {
		cb.events = append(cb.events, ch.opened)
	}
	return ch
}

// unmoved reports, without a lock, that o changes nothing in the
// circuit: it is closed, holds and lends nothing, no slowed recovery is
// under way, and o is no probe's, and
// an answer or a failure that opens nothing.
func (cb *circuit) unmoved(o observation) bool {
	quiet := !cb.isOpen.Load() && cb.nHeld.Load() == 0 && !cb.lending.Load() && !cb.slow.Load() && o.probe == 0
	return quiet && (o.answered || !o.trip)
}

// takeEvents moves the transitions not yet reported into buf, oldest
// first (true: opened), and returns it.
func (cb *circuit) takeEvents(buf []bool) []bool {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	buf = append(buf, cb.events...)
	cb.events = cb.events[:0]
	return buf
}

// quiet reports, without a lock, that the circuit is closed, holds
// nothing and has seen no retry fail: an answer changes nothing in it.
func (cb *circuit) quiet() bool {
	return !cb.isOpen.Load() && cb.nHeld.Load() == 0 && !cb.retryFailed.Load()
}

// observeLocked applies an outcome; mu is held.
func (cb *circuit) observeLocked(o observation, now time.Time) change {
	var ch change
	switch {
	case o.answered:
		ch.closed = cb.open
		cb.answered(now, o)
	case o.failed:
		if o.failing {
			cb.setLoan(0) // the host is failing again: the recovery is over, its loan with it
		}
		if o.trip && !cb.open {
			ch.opened = true
			cb.trip(now)
		} else {
			// An attempt failed: a recovery under way (retries on the
			// ramp, or let go and not yet gone) halts until the next
			// answer, and goes on at the pace of the answers.
			cb.turnedAway(o.retry, now)
			cb.rehold()
		}
		if o.probe != 0 && o.probe == cb.probing {
			cb.failedProbe(now)
		} else if o.probe == 0 {
			cb.pushProbe(now)
		}
	default:
		cb.ended(o.probe, now) // the probe told nothing (its caller gave up)
	}
	return ch
}

// trip opens the circuit: held and ramping retries wait for a probe.
func (cb *circuit) trip(now time.Time) {
	cb.open = true
	cb.isOpen.Store(true)
	cb.setLoan(0)
	if len(cb.held) == 0 {
		cb.probes, cb.prevProbe = 0, 0
		cb.schedule(now)
	}
	cb.rehold()
}

// schedule sets when the next probe may go: a probe interval after now,
// shorter the more retries are held (a fifth with 20 held, an eighth at
// most, and never under minProbeGap), so that a process with many
// callers waiting finds the host back sooner.
func (cb *circuit) schedule(now time.Time) {
	d := max(cb.cfg.ProbeBackoff.Delay(cb.probes+1, cb.prevProbe), 0)
	cb.prevProbe = d
	if n := len(cb.held); n > 4 {
		d = max(d*4/time.Duration(n), d/8, min(d, minProbeGap))
	}
	cb.nextProbe = now.Add(d)
}

// pushProbe puts the next probe back by its interval from now: another
// attempt to the host has just failed, and told as much as a probe would,
// so that a client whose first attempts keep coming sends no probes.
func (cb *circuit) pushProbe(now time.Time) {
	if cb.open || len(cb.held) > 0 {
		if at := now.Add(cb.prevProbe); cb.nextProbe.Before(at) {
			cb.nextProbe = at
		}
	}
}

// failedProbe records the probe in flight as failed: the next one waits.
func (cb *circuit) failedProbe(now time.Time) {
	cb.probing = 0
	cb.retryFailed.Store(true)
	cb.probes++
	cb.schedule(now)
	cb.wakeDue(now)
}

// ended ends a probe that told nothing (its caller gave up, or the base
// panicked): another may go at once.
func (cb *circuit) ended(ticket uint64, now time.Time) {
	if ticket != 0 && cb.probing == ticket {
		cb.probing = 0
		cb.wakeDue(now)
	}
}

// expire counts a probe that outlived its timeout as failed.
func (cb *circuit) expire(now time.Time) {
	if cb.probing != 0 && !now.Before(cb.probeEnd) {
		cb.failedProbe(now)
	}
}

// claim makes a new ticket the probe in flight and returns it.
func (cb *circuit) claim(now time.Time) uint64 {
	timeout := cb.cfg.ProbeTimeout
	if timeout == 0 {
		timeout = max(probeTimeoutFactor*cb.prevProbe, minProbeTimeout)
	}
	t := cb.tickets.Add(1)
	cb.probing, cb.probeEnd, cb.refused = t, now.Add(timeout), 0
	return t
}

// holding is how many retries are held, ramping or let go and not yet
// gone, without a lock.
func (cb *circuit) holding() int { return int(cb.nHeld.Load()) }

// lends reports, without a lock, whether a recovery may still lend.
func (cb *circuit) lends() bool { return cb.lending.Load() }

// idle reports whether forgetting the host would lose nothing of the
// circuit's: closed, no probe in flight, nothing held.
func (cb *circuit) idle(int64) bool {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return !cb.open && cb.probing == 0 && cb.nHeld.Load() == 0
}
