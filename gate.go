// This file holds admission: the one place that decides, per host,
// whether an attempt goes out now, waits, is held or gives up, and the
// only place the retry budget is charged. Each host has one hostState,
// found by one lookup per request: the health score that both the budget's
// floor and the breaker read, the budget's counts, the breaker's circuit
// (breaker.go) and hedging's latencies. The rules, as a state diagram,
// are in the package documentation, "Admission".

package retryhttp

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// gate is a Transport's admission: its budget, breaker and hedging, and
// the state of every host it has sent to.
type gate struct {
	budget  *Budget        // nil: no budget
	breaker *BreakerConfig // resolved; nil: no breaker
	hedge   *HedgeConfig   // nil: no hedging
	hosts   hostMap[hostState]
	tickets atomic.Uint64 // names probes, so that a late answer ends only its own; its count is the probes sent
}

// hostState is one host's admission state. score, open and held are read
// on every attempt without a lock; the circuit changes only while the host
// is failing, under mu.
type hostState struct {
	score atomic.Int32 // health: +1 per failure worth retrying, -2 per answer, at least 0
	open  atomic.Bool  // the breaker is open (mirrors cb.open)
	held  atomic.Int32 // retries held now: while any are, attempts are numbered
	since atomic.Int64 // UnixNano of the failure that took the score off 0
	// retryFailed: a retry or a probe has failed since the score left 0.
	// Until one has, the failures are first attempts only, which say
	// nothing of whether a retry would succeed (requests that each fail
	// once, as a test's fake does, or a bad backend behind a balancer):
	// they make no held retry give up at its limit, where it goes as the
	// probe instead.
	retryFailed atomic.Bool
	seq         atomic.Uint64
	bh          *hostEntry[hostBudget] // the budget's counts for this host, nil without one
	lat         *latencies             // recent latencies, with hedging only
	host        string                 // the canonical host, for breaker events

	mu sync.Mutex
	cb circuit
	// evMu orders the reports of this host's breaker transitions: taken
	// before mu is let go, held while they are reported, so that they
	// come in order and never at once, without mu held.
	evMu sync.Mutex
}

// ticket is one request's admission state.
type ticket struct {
	firstFail  time.Time // when its first attempt failed
	wasHeld    bool      // a retry of it was held
	charged    bool      // the next attempt's retry is charged to the budget
	chargedSec int64     // in this second
	seq        uint64    // the attempt in flight's number, if retries were held when it went
	retry      bool      // the attempt in flight is a retry or a probe
	probe      uint64    // the attempt in flight is this probe, if not 0
	lastDelay  time.Duration
}

const (
	// failingAfter is the score at which a host is failing: the budget
	// lends it no floor, and a retry the budget refuses is held.
	failingAfter = 4
	// minFailingSpan is how long failures must have lasted before a host
	// counts as failing, or its breaker opens: failures that all come in
	// one instant (a test's parallel requests with Constant(0), a burst
	// retried at once) are no outage, and holding them would cost
	// requests that succeed a moment later.
	minFailingSpan = 10 * time.Millisecond
)

func newGate(budget *Budget, breaker *BreakerConfig, hedge *HedgeConfig) *gate {
	g := &gate{budget: budget, breaker: breaker, hedge: hedge}
	g.hosts.init = func(key string, h *hostState) {
		h.host = key
		if g.budget != nil {
			h.bh = g.budget.hosts.entry(key, nil, 0)
		}
		if g.hedge != nil {
			h.lat = new(latencies)
		}
	}
	g.hosts.evictable = func(h *hostState) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return !h.cb.open && h.score.Load() == 0 && len(h.cb.held) == 0 && h.cb.probing == 0
	}
	return g
}

// enter finds the request's host and counts its first attempt.
func (g *gate) enter(scheme, host string) *hostState {
	var buf [maxHostKey]byte
	key, kb := canonicalHost(scheme, host, &buf)
	sec := unixSecond()
	hs := g.hosts.getKey(key, kb, sec)
	if hs.bh != nil {
		hs.bh.touch(sec)
		bucketAdd(&hs.bh.v.firsts[uint64(sec)%budgetBuckets], sec)
	}
	return hs
}

// failing reports whether the host is failing: its score has reached
// failingAfter and its failures have lasted minFailingSpan, or it has
// reached the breaker's threshold at once (a burst that failed whole).
func (g *gate) failing(hs *hostState, now time.Time) bool {
	s := hs.score.Load()
	return s >= failingAfter && (hs.lasted(now) || (g.breaker != nil && s >= int32(g.breaker.Threshold)))
}

// lasted reports whether the host's failures have lasted minFailingSpan.
func (hs *hostState) lasted(now time.Time) bool {
	since := hs.since.Load()
	return since != 0 && now.UnixNano()-since >= int64(minFailingSpan)
}

// scoreFail adds a failure to the score, up to cap, and returns it.
func (hs *hostState) scoreFail(now time.Time, cap int32) int32 {
	for {
		s := hs.score.Load()
		if s >= cap {
			return s
		}
		if hs.score.CompareAndSwap(s, s+1) {
			if s == 0 {
				hs.since.Store(now.UnixNano())
			}
			return s + 1
		}
	}
}

// scoreAnswer takes an answer off the score. On a healthy host it only
// reads.
func (hs *hostState) scoreAnswer() {
	for {
		s := hs.score.Load()
		if s == 0 {
			return
		}
		n := max(s-2, 0)
		if hs.score.CompareAndSwap(s, n) {
			if n == 0 {
				hs.since.Store(0)
				hs.retryFailed.Store(false)
			}
			return
		}
	}
}

// scoreCap is where the score stops: no higher than what opens the
// breaker, so that a long outage is forgotten as fast as a short one.
func (g *gate) scoreCap() int32 {
	if g.breaker != nil {
		return int32(max(g.breaker.Threshold, failingAfter))
	}
	return failingAfter
}

// admitFirst lets a first attempt through. Only FailFast refuses one:
// while the host's breaker is open, it goes only as the probe.
func (g *gate) admitFirst(k *call) bool {
	hs := k.hs
	if g.breaker == nil || !g.breaker.FailFast || !hs.open.Load() {
		return true
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	now := time.Now()
	g.expire(hs, now)
	if !hs.cb.open {
		return true
	}
	if hs.cb.probing == 0 && (!now.Before(hs.cb.nextProbe) || hs.cb.refused >= failFastEvery-1) {
		k.t.probe = g.tickets.Add(1)
		hs.cb.claimProbe(g.breaker, now, k.t.probe)
		return true
	}
	hs.cb.refused++
	return false
}

// sending numbers attempt n, about to go, while retries are held, so that
// a held retry can tell whether the host failed since it was held, and
// notes whether it is a retry (or a probe), whose failure shows that
// retries fail too.
func (g *gate) sending(k *call, n int) {
	k.t.seq = 0
	k.t.retry = n > 1 || k.t.probe != 0
	if hs := k.hs; hs != nil && hs.held.Load() > 0 {
		k.t.seq = hs.seq.Add(1)
	}
}

// record takes an attempt's result into the host's state, once.
func (g *gate) record(k *call, r *result) {
	hs, t := k.hs, &k.t
	if hs == nil {
		return
	}
	probe := t.probe
	t.probe = 0
	switch {
	case r.err == nil && !r.retryable: // the host did its job
		hs.scoreAnswer()
		if g.breaker != nil && (hs.open.Load() || hs.held.Load() > 0 || probe != 0) {
			hs.mu.Lock()
			closed := hs.cb.open
			if hs.cb.open || len(hs.cb.held) > 0 {
				if hs.cb.open {
					hs.score.Store(0)
					hs.since.Store(0)
					hs.retryFailed.Store(false)
				}
				hs.cb.release(time.Now())
				hs.open.Store(false)
				hs.held.Store(0)
			} else {
				hs.cb.probeEnded(probe, time.Now())
			}
			g.report(k, closed, BreakerEvent{Host: hs.host, State: BreakerClosed})
		}
	case r.retryable:
		now := time.Now()
		s := hs.scoreFail(now, g.scoreCap())
		if t.retry {
			hs.retryFails()
		}
		if g.breaker == nil {
			return
		}
		trip := !hs.open.Load() && s >= int32(g.breaker.Threshold) && hs.lasted(now)
		if trip || hs.open.Load() || hs.held.Load() > 0 || probe != 0 {
			hs.mu.Lock()
			opened := trip && !hs.cb.open
			if opened {
				hs.cb.trip(g.breaker, now)
				hs.open.Store(true)
			}
			if hs.cb.open || len(hs.cb.held) > 0 || probe != 0 {
				hs.cb.failed(g.breaker, now, t.seq, probe)
			}
			g.report(k, opened, BreakerEvent{Host: hs.host, State: BreakerOpen, Score: int(s)})
		}
	case probe != 0:
		// The probe told nothing (the caller gave up): another may go.
		hs.mu.Lock()
		hs.cb.probeEnded(probe, time.Now())
		hs.mu.Unlock()
	}
}

// report lets go of hs.mu, which is held, and reports the transition ev
// if it happened, in order with the host's others.
func (g *gate) report(k *call, happened bool, ev BreakerEvent) {
	hs := k.hs
	if !happened {
		hs.mu.Unlock()
		return
	}
	hs.evMu.Lock()
	hs.mu.Unlock()
	defer hs.evMu.Unlock()
	g.changed(k, ev)
}

// changed reports a breaker transition: metrics, a log record, the
// user's callback; hs.mu is not held.
func (g *gate) changed(k *call, ev BreakerEvent) {
	c := k.c
	c.metrics.breakerState(ev.State)
	if c.logger != nil {
		level, msg := slog.LevelInfo, "retryhttp: breaker closed"
		if ev.State == BreakerOpen {
			level, msg = slog.LevelWarn, "retryhttp: breaker open"
		}
		c.logger.LogAttrs(k.ctx, level, msg, slog.String("name", c.displayName()),
			slog.String("host", ev.Host), slog.Int("score", ev.Score))
	}
	if f := g.breaker.OnStateChange; f != nil {
		f(ev)
	}
}

// expire counts the probe in flight as failed if it outlived its timeout;
// hs.mu is held.
func (g *gate) expire(hs *hostState, now time.Time) {
	if hs.cb.expire(g.breaker, now, hs.seq.Load()) {
		hs.retryFails()
	}
}

// retryFails notes that a retry or a probe to the host failed; it writes
// only the first time in a failing spell.
func (hs *hostState) retryFails() {
	if !hs.retryFailed.Load() {
		hs.retryFailed.Store(true)
	}
}

// abandon ends the probe in flight without a result: the base panicked.
func (g *gate) abandon(k *call) {
	if k.hs != nil && k.t.probe != 0 {
		k.hs.mu.Lock()
		k.hs.cb.probeEnded(k.t.probe, time.Now())
		k.hs.mu.Unlock()
		k.t.probe = 0
	}
}

// admission is what becomes of a retry that the ladder allows.
type admission uint8

const (
	admitWait admission = iota // wait for the delay, then send
	admitHold                  // hold until released, probing, or the limit
)

// admitRetry decides a retry that the ladder (decide.go) allows after
// delay: it waits and goes (charged to the budget, unless nothing was
// sent), is held (the breaker is open, or the host is failing and the
// budget has no room), or gives up now, without a wait: GiveUpBudget, or
// GiveUpCircuitOpen under FailFast when it cannot be the probe.
func (g *gate) admitRetry(k *call, r *result) (admission, GiveUpReason) {
	hs, t := k.hs, &k.t
	t.charged = false
	if hs == nil {
		return admitWait, ""
	}
	open := hs.open.Load()
	if open && g.breaker.FailFast {
		if g.claimFailFast(k) {
			return admitWait, ""
		}
		return admitWait, GiveUpCircuitOpen
	}
	if open {
		return admitHold, ""
	}
	if g.budget == nil || r.notSent {
		return admitWait, ""
	}
	now := time.Now()
	sec := unixSecond()
	if g.budget.allow(&hs.bh.v, sec, !g.failing(hs, now)) {
		t.charged, t.chargedSec = true, sec
		return admitWait, ""
	}
	if g.breaker != nil && !g.breaker.FailFast && hs.score.Load() >= failingAfter {
		// Failures in a row, if not yet over time: hold, rather than
		// lose a retry that the host's next success would let go.
		return admitHold, ""
	}
	return admitWait, GiveUpBudget
}

// claimFailFast makes a FailFast retry the probe, if one is due.
func (g *gate) claimFailFast(k *call) bool {
	hs := k.hs
	hs.mu.Lock()
	defer hs.mu.Unlock()
	now := time.Now()
	g.expire(hs, now)
	if !hs.cb.open {
		return true
	}
	if hs.cb.probing != 0 || now.Before(hs.cb.nextProbe) {
		return false
	}
	k.t.probe = g.tickets.Add(1)
	hs.cb.claimProbe(g.breaker, now, k.t.probe)
	return true
}

// afterWait passes a retry whose wait has ended: if the breaker opened
// meanwhile, it is held (or, with FailFast, goes only as the probe).
func (g *gate) afterWait(k *call, notBefore, limit time.Time) (GiveUpReason, error) {
	hs := k.hs
	if hs == nil || g.breaker == nil || !hs.open.Load() || k.t.probe != 0 {
		return "", nil
	}
	if g.breaker.FailFast {
		if g.claimFailFast(k) {
			return "", nil
		}
		return GiveUpCircuitOpen, nil
	}
	return g.hold(k, notBefore, limit)
}

// hold holds a retry until a success to the host releases it (it then
// goes at its paced turn), it may go as the probe, or its limit: there it
// gives up (GiveUpBreaker) if an attempt sent to the host since it was
// held has failed and a retry or probe has failed since the host began
// failing (hostState.retryFailed), and otherwise goes as the probe itself,
// once none is in flight. It never lets the retry go before notBefore. A
// context that ends first ends the hold with its error.
func (g *gate) hold(k *call, notBefore, limit time.Time) (GiveUpReason, error) {
	if k.t.wasHeld && !time.Now().Before(k.t.firstFail.Add(k.c.schedule)) && g.breaker.MaxHold == 0 {
		// Held before, and its schedule is spent: it had its chance.
		return GiveUpBreaker, nil
	}
	k.t.wasHeld = true
	for range 100 { // each pass is a hold that ended in a release and a reopening
		w, err := g.holdOnce(k, notBefore, limit)
		if w == nil || err != nil {
			// Without a holder: the probe (k.t.probe), or a give-up.
			if err == nil && k.t.probe == 0 && k.pastMaxElapsed(time.Now()) {
				return GiveUpMaxElapsed, nil
			}
			return giveUpIf(err == nil && k.t.probe == 0), err
		}
		if err := sleepUntil(k.ctx, w.turn); err != nil {
			return "", err
		}
		if !k.hs.open.Load() {
			return "", nil
		}
	}
	return GiveUpBreaker, nil
}

func giveUpIf(b bool) GiveUpReason {
	if b {
		return GiveUpBreaker
	}
	return ""
}

// holdOnce holds the retry once. It returns the holder if a success
// released it, nil and no error if it gives up, and a nil holder with the
// probe claimed (k.t.probe) if it goes as the probe.
func (g *gate) holdOnce(k *call, notBefore, limit time.Time) (*holder, error) {
	hs, cb := k.hs, &k.hs.cb
	hs.mu.Lock()
	now := time.Now()
	w := &holder{since: now, notBefore: notBefore, limit: limit, seq: hs.seq.Load(), wake: make(chan struct{}, 1)}
	if !cb.open && len(cb.held) == 0 {
		cb.probes, cb.prevProbe = 0, 0
		cb.schedule(g.breaker, now)
	}
	if cb.changed == nil {
		cb.changed = make(chan struct{})
	}
	cb.held = append(cb.held, w)
	hs.held.Add(1)
	hs.mu.Unlock()
	for range maxHoldTurns { // each turn waits for an event or a timer
		hs.mu.Lock()
		now = time.Now()
		g.expire(hs, now)
		if w.released {
			hs.mu.Unlock()
			return w, nil
		}
		if d := g.holdStep(k, w, now); d != stepWait {
			g.leave(hs, w, now)
			hs.mu.Unlock()
			return nil, nil // a give-up, or the probe (claimed in k.t.probe)
		}
		wait := cb.nextEvent(w, now).Sub(now)
		changed := cb.changed
		hs.mu.Unlock()
		if err := g.await(k.ctx, changed, w.wake, wait); err != nil {
			hs.mu.Lock()
			if !w.released {
				g.leave(hs, w, time.Now())
			}
			hs.mu.Unlock()
			if err == context.DeadlineExceeded && !time.Now().Before(limit) {
				return nil, nil // the deadline is the limit: give up with the last response
			}
			return nil, err
		}
	}
	hs.mu.Lock()
	if !w.released {
		g.leave(hs, w, time.Now())
	}
	hs.mu.Unlock()
	return nil, nil // never reached in practice: give up
}

// maxHoldTurns bounds the turns of one hold: each waits for an event or a
// timer, so that no real hold comes near it.
const maxHoldTurns = 1 << 20

type holdStepResult uint8

const (
	stepWait holdStepResult = iota
	stepGiveUp
	stepProbe
)

// holdStep applies the rules to a held retry; hs.mu is held.
func (g *gate) holdStep(k *call, w *holder, now time.Time) holdStepResult {
	hs, cb := k.hs, &k.hs.cb
	atLimit := !now.Before(w.limit)
	if (atLimit && hs.retryFailed.Load() && cb.lastFail > w.seq) || k.pastMaxElapsed(now) {
		// Its limit, after a failure since it was held while retries
		// are seen failing; or past
		// WithMaxElapsed, which no attempt may start after, not even
		// as the probe.
		return stepGiveUp
	}
	if !cb.probeDue(w, now) {
		return stepWait
	}
	free := atLimit || len(cb.held) >= freeProbeHeld || k.t.charged || g.budget == nil
	if !free {
		sec := unixSecond()
		if !g.budget.allow(&hs.bh.v, sec, !g.failing(hs, now)) {
			cb.schedule(g.breaker, now) // no room: look again at the next probe time
			return stepWait
		}
		k.t.charged, k.t.chargedSec = true, sec
	}
	k.t.probe = g.tickets.Add(1)
	cb.claimProbe(g.breaker, now, k.t.probe)
	return stepProbe
}

// leave takes w out of the queue; hs.mu is held.
func (g *gate) leave(hs *hostState, w *holder, now time.Time) {
	hs.cb.remove(w)
	hs.held.Add(-1)
	hs.cb.wakeDue(now)
}

// await waits for a change, a wake, d, or the end of ctx.
func (g *gate) await(ctx context.Context, changed, wake <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-changed:
	case <-wake:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// mayHedge asks for a hedge: none while the host's breaker is open or
// retries are held, and each one spends the budget.
func (g *gate) mayHedge(k *call) bool {
	hs := k.hs
	if hs.open.Load() || hs.held.Load() > 0 {
		return false
	}
	return g.budget == nil || g.budget.allow(&hs.bh.v, unixSecond(), !g.failing(hs, time.Now()))
}

// refund gives back the charge of a retry that was never sent.
func (g *gate) refund(k *call) {
	if k.t.charged && k.hs != nil && g.budget != nil {
		g.budget.refund(&k.hs.bh.v, k.t.chargedSec)
	}
	k.t.charged = false
}

// sleepUntil waits until t, or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	return sleep(ctx, time.Until(t))
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

// unixSecond returns the current Unix second. The budget asks it on every
// first attempt, so it reads the monotonic clock alone, one clock read
// where time.Now makes two (a third of a success's cost in retryhttp,
// profiled against an in-memory base), anchored to the wall clock at
// start, so that a step of the wall clock cannot move the budget's buckets
// under it. (Inside a testing/synctest bubble it follows the bubble's
// clock.)
func unixSecond() int64 {
	return (clockBase.UnixNano() + int64(time.Since(clockBase))) / int64(time.Second)
}

var clockBase = time.Now()
