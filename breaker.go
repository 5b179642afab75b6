// This file holds the retry breaker, on by default: per host, while
// attempts keep failing, retries are held instead of sent, for no longer
// than their own backoff schedule; one of them at a time goes out as a
// probe, charged to the budget; and when any attempt succeeds, the held
// retries are released at the pace at which they were held. With
// FailFast, first attempts are refused too while the host's breaker is
// open. The loop calls it from transport.go.

package retryhttp

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// BreakerConfig configures the retry breaker (see [WithRetryBreaker]). A
// zero field takes its default.
type BreakerConfig struct {
	// Disabled turns the breaker off: every retry is sent when its wait
	// ends, limited by the budget alone.
	Disabled bool
	// Threshold opens a host's breaker: each attempt to the host that
	// fails in a way worth retrying adds 1 to its failure score, each
	// answer takes 2 off (down to 0), and the breaker opens when the score
	// reaches Threshold, that is after Threshold failures in a row, or
	// while clearly more than two attempts in three fail. Default 10.
	Threshold int
	// ProbeBackoff spaces the probes while the breaker is open: the n-th
	// probe may go ProbeBackoff.Delay(n, prev) after the last attempt to
	// the host failed, whether that was a probe or a first attempt. The
	// default follows the retry schedule: a delay drawn between a fifth
	// and a quarter of its length (280ms to 350ms with the defaults), so
	// that a held retry sees about four probes while it is held, and a
	// client whose first attempts come more often than that needs none
	// (each failure of one pushes the next probe back). With FailFast,
	// EqualJitter(250ms, 2s).
	ProbeBackoff Backoff
	// MaxHold is the longest a retry is held. The default, 0, holds it no
	// longer than its request's backoff schedule: until the time its last
	// attempt would have gone at the latest, that is the sum of the
	// backoff's upper bounds for every retry (1.4s with the defaults)
	// after the request's first failure. A context
	// deadline that comes sooner ends the hold sooner. The request then
	// gives up with its last response, reason "breaker".
	MaxHold time.Duration
	// FailFast makes the breaker refuse first attempts too while a host's
	// breaker is open: RoundTrip returns at once an [*Error] for which
	// errors.Is(err, [ErrCircuitOpen]) holds, reason "circuit_open",
	// without sending anything, so that the caller can serve a fallback.
	// One request at a time goes out as the probe, at ProbeBackoff or as
	// every sixth request that would be refused, whichever comes first.
	FailFast bool
}

// WithRetryBreaker configures the retry breaker, which is on by default
// with the zero BreakerConfig. While a host is failing (Threshold failed
// attempts in a row), retries to it are held instead of sent: one of them
// at a time goes out as a probe, charged to the budget, and when any
// attempt to the host succeeds (a probe, or a first attempt, which is
// never held), the held retries are released, paced as they arrived, so
// that they come back no faster than they were held. A retry that
// nothing releases within its own backoff schedule gives up with its last
// response. Each breaker state is per host and per Transport.
func WithRetryBreaker(cfg BreakerConfig) Option {
	return Option{apply: func(c *config) error {
		switch {
		case cfg.Threshold < 0:
			return optErr(fmt.Sprintf("WithRetryBreaker(Threshold: %d)", cfg.Threshold), "threshold is negative")
		case cfg.MaxHold < 0:
			return optErr(fmt.Sprintf("WithRetryBreaker(MaxHold: %v)", cfg.MaxHold), "hold is negative")
		}
		if cfg.Disabled {
			c.breaker = nil
			return nil
		}
		c.breaker = newBreaker(cfg)
		return nil
	}, name: "WithRetryBreaker"}
}

func newBreaker(cfg BreakerConfig) *breaker {
	if cfg.Threshold == 0 {
		cfg.Threshold = DefaultBreakerThreshold
	}
	if cfg.ProbeBackoff == nil && cfg.FailFast {
		cfg.ProbeBackoff = equalJitter{DefaultFailFastProbeBase, DefaultFailFastProbeMax}
	}
	b := &breaker{cfg: cfg}
	b.hosts.init = func(h *breakerHost) { h.b = b }
	b.hosts.evictable = func(h *breakerHost) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return !h.open.Load() && h.score.Load() == 0 && h.nHeld == 0
	}
	return b
}

type breaker struct {
	cfg   BreakerConfig
	hosts hostMap[breakerHost]
}

// resolve completes the configuration once the retry schedule is known.
func (b *breaker) resolve(schedule time.Duration) {
	if b.cfg.ProbeBackoff == nil {
		lo := max(schedule/5, time.Millisecond)
		b.cfg.ProbeBackoff = uniformBackoff{lo, max(schedule/4, lo)}
	}
}

// uniformBackoff draws every delay uniformly in [lo, hi].
type uniformBackoff struct{ lo, hi time.Duration }

func (u uniformBackoff) Delay(int, time.Duration) time.Duration { return uniform(u.lo, u.hi) }

// breakerHost is one host's breaker. score and open are read on every
// attempt, without a lock; the rest changes only while the host is
// failing, under mu.
type breakerHost struct {
	score atomic.Int32
	open  atomic.Bool
	b     *breaker // set once, before the host is shared

	mu        sync.Mutex
	changed   chan struct{} // closed, and replaced, when the breaker closes or a probe ends
	probing   bool          // a probe is in flight
	refused   int           // FailFast: requests refused since the last probe
	probes    int           // failed attempts since the breaker opened
	prevProbe time.Duration
	nextProbe time.Time
	held      []*holder // retries held, oldest first (some may have left)
	nHeld     int       // retries held now
	// designated is the held retry that watches the probe timer; the
	// others sleep until their limit or the close, so that a probe cycle
	// wakes one goroutine, however many are held.
	designated *holder
	closedAt   time.Time
	oldest     time.Time // when the oldest retry still held at closedAt was held
}

// freeProbeHeld is how many held retries make a probe free of the budget:
// it answers for all of them, so it saves more than it costs. A probe for
// fewer (an instance of a large fleet, with little traffic of its own) is
// charged like any retry, so that probes cannot add up across a fleet.
const freeProbeHeld = 4

// holder is one held retry.
type holder struct {
	since time.Time
	gone  bool
	wake  chan struct{} // a token: look again, you may be the next probe
}

// holdMode says how an attempt passed the breaker.
type holdMode uint8

const (
	sendNow      holdMode = iota // the breaker is closed: an ordinary attempt
	sendProbe                    // the breaker is open: this attempt is its probe
	sendReleased                 // held, then released by a success
	refused                      // FailFast: the breaker is open and no probe is due
)

// succeeded records an attempt that the host answered. The common case, a
// healthy host, only reads.
func (h *breakerHost) succeeded(cl clock) {
	if h.open.Load() {
		h.close(cl.Now())
	}
	for {
		s := h.score.Load()
		if s == 0 || h.score.CompareAndSwap(s, max(s-2, 0)) {
			return
		}
	}
}

// failed records an attempt that failed in a way worth retrying; probe
// says whether it was the probe.
func (h *breakerHost) failed(now time.Time, probe bool) {
	threshold := int32(h.b.cfg.Threshold)
	for {
		s := h.score.Load()
		if s >= threshold || h.score.CompareAndSwap(s, s+1) {
			break
		}
	}
	if !h.open.Load() {
		if h.score.Load() >= threshold {
			h.trip(now)
		}
		return
	}
	// Open: any failure is as good as a probe; the next one waits.
	h.mu.Lock()
	defer h.mu.Unlock()
	if probe && h.probing {
		h.probing = false
		h.handoff()
	}
	h.probes++
	h.scheduleProbe(now)
}

// probeEnded ends a probe that told nothing (the caller gave up, or the
// base panicked): another may go at once.
func (h *breakerHost) probeEnded(time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.probing {
		h.probing = false
		h.handoff()
	}
}

func (h *breakerHost) trip(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open.Load() {
		return
	}
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	h.probes, h.prevProbe = 0, 0
	h.scheduleProbe(now)
	h.open.Store(true)
}

// scheduleProbe sets when the next probe may go; h.mu is held.
func (h *breakerHost) scheduleProbe(now time.Time) {
	d := max(h.b.cfg.ProbeBackoff.Delay(h.probes+1, h.prevProbe), 0)
	h.prevProbe = d
	h.nextProbe = now.Add(d)
}

// handoff wakes the held retry that is to watch the probe timer now: the
// designated one, or else the oldest still held; h.mu is held.
func (h *breakerHost) handoff() {
	if h.designated == nil || h.designated.gone {
		h.designated = nil
		for _, w := range h.held {
			if !w.gone {
				h.designated = w
				break
			}
		}
	}
	if w := h.designated; w != nil {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// signal wakes every held retry to look again; h.mu is held.
func (h *breakerHost) signal() {
	if h.changed != nil {
		close(h.changed)
	}
	h.changed = make(chan struct{})
}

func (h *breakerHost) close(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.open.Load() {
		return
	}
	h.open.Store(false)
	h.score.Store(0)
	h.probing = false
	h.closedAt, h.oldest = now, now
	h.designated = nil
	h.prune()
	if len(h.held) > 0 {
		h.oldest = h.held[0].since
	}
	h.signal()
}

// prune drops the retries that left from the front of the queue; h.mu is
// held.
func (h *breakerHost) prune() {
	i := 0
	for i < len(h.held) && h.held[i].gone {
		h.held[i] = nil
		i++
	}
	h.held = h.held[i:]
	if len(h.held) == 0 {
		h.held = nil
	}
}

// tryProbe claims the probe if one is due and the budget, if any, has room
// for it; h.mu is held.
//
// A probe is a real attempt of the request that sends it, and a failed one
// uses that attempt up. So that no request runs out of attempts by probing
// while others have more to spare, a retry that is its request's last
// attempt volunteers only one probe interval later than others.
func (h *breakerHost) tryProbe(now time.Time, pb probeBudget, last bool) bool {
	due := h.nextProbe
	if last {
		due = due.Add(h.prevProbe)
	}
	if h.probing || now.Before(due) {
		return false
	}
	if pb.b != nil && h.nHeld < freeProbeHeld && !pb.b.allow(pb.h, pb.sec) {
		// The budget says no: look again at the next probe time.
		h.scheduleProbe(now)
		return false
	}
	h.probing = true
	return true
}

// admit lets a first attempt through. Only FailFast refuses one: while the
// host's breaker is open, it goes only as the probe.
func (k *call) admit() bool {
	h := k.breaker
	if !h.open.Load() || !h.b.cfg.FailFast {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.open.Load() {
		return true
	}
	if h.tryProbe(k.c.clock.Now(), probeBudget{}, false) ||
		(!h.probing && h.refused >= failFastEvery-1) {
		h.probing, h.refused = true, 0
		k.pass = sendProbe
		return true
	}
	h.refused++
	return false
}

// failFastEvery makes every failFastEvery-th request that an open FailFast
// breaker would refuse its probe, if the probe backoff has not come first:
// probes follow the traffic, a sixth of it at most, so that a busy client
// sees a recovery within a few of its requests and a quiet one within its
// probe backoff.
const failFastEvery = 6

// passBreaker is called when a retry's wait has ended. While the host's
// breaker is open, it holds the retry until it may go as the probe or a
// success releases it, or until its schedule ends (GiveUpBreaker); with
// FailFast it goes only as the probe (else GiveUpCircuitOpen).
func (k *call) passBreaker(attempt int, delay time.Duration, r *result) (GiveUpReason, error) {
	h, c := k.breaker, k.c
	k.pass = sendNow
	if !h.open.Load() {
		return k.chargeLate(r)
	}
	if h.b.cfg.FailFast {
		if !k.admit() {
			r.err = noResponse(r, ErrCircuitOpen)
			return GiveUpCircuitOpen, nil
		}
		return "", nil
	}
	limit := k.holdLimit()
	if dl, ok := k.ctx.Deadline(); ok && dl.Before(limit) {
		limit = dl
	}
	mode, err := k.hold(limit, attempt+1 == c.maxAttempts)
	switch {
	case err == ErrBreakerHold:
		r.err = noResponse(r, ErrBreakerHold)
		return GiveUpBreaker, nil
	case err != nil:
		return "", err
	case mode == sendNow:
		return k.chargeLate(r)
	}
	k.pass = mode
	return "", nil
}

// holdLimit is the latest time a retry of this request may be held.
func (k *call) holdLimit() time.Time {
	limit := k.firstFail.Add(k.c.schedule)
	if mh := k.breaker.b.cfg.MaxHold; mh > 0 {
		limit = k.c.clock.Now().Add(mh)
	}
	if me := k.c.maxElapsed; me > 0 && k.start.Add(me).Before(limit) {
		limit = k.start.Add(me)
	}
	return limit
}

// noResponse is the error a request that gives up without a response ends
// with: err, and the last attempt's error if it had one.
func noResponse(r *result, err error) error {
	if r.resp != nil {
		return r.err
	}
	if r.err != nil {
		return fmt.Errorf("%w (last attempt: %w)", err, r.err)
	}
	return err
}

// chargeLate charges a retry that was decided while the breaker was open
// (and so not charged) but goes out as an ordinary retry.
func (k *call) chargeLate(r *result) (GiveUpReason, error) {
	if k.charged || k.budget == nil || r.notSent {
		return "", nil
	}
	k.charged = true
	if !k.c.budget.allow(k.budget, k.c.clock.Second()) {
		return GiveUpBudget, nil
	}
	return "", nil
}

// hold waits while the host's breaker is open, until this retry may go as
// the probe (charged to the budget) or a success releases it, or until
// limit, which it reports as ErrBreakerHold, or until ctx ends. A released
// retry then waits for its turn: as long after the breaker closed as it
// was held after the oldest retry still held, so that the held retries
// come back at the pace at which they arrived, and never later than limit.
func (k *call) hold(limit time.Time, last bool) (holdMode, error) {
	h, cl := k.breaker, k.c.clock
	var pb probeBudget
	if k.budget != nil {
		pb = probeBudget{k.c.budget, k.budget, cl.Second()}
	}
	var me *holder
	defer func() {
		if me != nil {
			h.mu.Lock()
			me.gone = true
			h.nHeld--
			if h.designated == me {
				h.designated = nil
				if h.open.Load() && !h.probing {
					h.handoff()
				}
			}
			h.prune()
			h.mu.Unlock()
		}
	}()
	for range 1000 { // each turn waits for an event or a timer
		h.mu.Lock()
		now := cl.Now()
		if !h.open.Load() {
			if me == nil {
				h.mu.Unlock()
				return sendNow, nil
			}
			turn := h.closedAt.Add(min(me.since.Sub(h.oldest), limit.Sub(me.since)))
			h.mu.Unlock()
			if err := cl.Sleep(k.ctx, turn.Sub(now)); err != nil {
				return sendNow, err
			}
			if h.open.Load() {
				continue // open again: hold again
			}
			return sendReleased, nil
		}
		if !now.Before(limit) {
			h.mu.Unlock()
			return sendNow, ErrBreakerHold
		}
		if h.tryProbe(now, pb, last) {
			if h.designated == me {
				h.designated = nil
			}
			h.mu.Unlock()
			k.charged = true
			return sendProbe, nil
		}
		if me == nil {
			me = &holder{since: now, wake: make(chan struct{}, 1)}
			h.held = append(h.held, me)
			h.nHeld++
		}
		changed := h.changed
		wait := limit.Sub(now)
		if !h.probing && (h.designated == nil || h.designated == me) {
			h.designated = me
			due := h.nextProbe
			if last {
				due = due.Add(h.prevProbe)
			}
			wait = min(wait, due.Sub(now))
		}
		h.mu.Unlock()

		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-changed:
		case <-me.wake:
		case <-t.C:
		case <-k.ctx.Done():
			t.Stop()
			return sendNow, k.ctx.Err()
		}
		t.Stop()
	}
	return sendNow, ErrBreakerHold
}

// probeBudget is the budget a probe is charged to.
type probeBudget struct {
	b   *Budget
	h   *hostBudget
	sec int64
}
