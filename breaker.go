// This file holds the retry breaker's configuration and its state machine:
// one circuit per host, closed or open, with the queue of held retries and
// the probe schedule. Which request goes, waits, is held or gives up is
// not decided here but in gate.go, which is the only caller.

package retryhttp

import (
	"fmt"
	"time"
)

// BreakerConfig configures the retry breaker (see [WithRetryBreaker]). A
// zero field takes its default.
type BreakerConfig struct {
	// Disabled turns the breaker off, as WithoutRetryBreaker does.
	//
	// Deprecated: use WithoutRetryBreaker, the one way to turn off a
	// feature that is on by default; Disabled stays until v1.
	Disabled bool
	// Threshold opens a host's breaker: each attempt to the host that
	// fails in a way worth retrying adds 1 to the host's health score,
	// each answer takes 2 off (down to 0), and the breaker opens when the
	// score reaches Threshold, that is after Threshold failures in a row,
	// or while clearly more than two attempts in three fail, once the
	// failures have lasted 10ms (failures that all come in one instant,
	// such as a test's parallel requests, are no outage). Default 10; at
	// most 1,000,000.
	Threshold int
	// ProbeBackoff spaces the probes while retries are held: the n-th
	// probe may go ProbeBackoff.Delay(n, prev) after the last attempt to
	// the host failed, whether that was a probe, a first attempt or
	// another request's retry. The default follows the retry schedule: a
	// delay drawn between a fifth and a quarter of its length (560ms to
	// 700ms with the defaults), so that a held retry sees about four
	// probes while it is held, and a client whose first attempts come
	// more often than that needs none. With FailFast,
	// EqualJitter(250ms, 2s).
	ProbeBackoff Backoff
	// ProbeTimeout is how long a probe may go unanswered before it counts
	// as failed, so that a probe that hangs does not stop the next one.
	// The default, 0, is 4 times the probe's own interval, and at least
	// 100ms.
	ProbeTimeout time.Duration
	// MaxHold is the longest a retry is held. The default, 0, holds it no
	// longer than its request's backoff schedule: until the time its last
	// attempt would have gone at the latest, that is the sum of the
	// backoff's upper bounds for every retry (2.8s with the defaults)
	// after the request's first failure, and never before its own wait
	// (Retry-After included) has ended. A retry that reaches its limit
	// gives up only if an attempt sent to the host since it was held has
	// failed, and a retry or a probe has failed since the host began
	// failing (failed first attempts alone do not show that a retry would
	// fail). Otherwise it goes out as the probe itself. A
	// context deadline that comes sooner ends the hold sooner. The
	// request then gives up with its last response, reason "breaker".
	MaxHold time.Duration
	// FailFast makes the breaker refuse first attempts too while a host's
	// breaker is open: RoundTrip returns at once an [*Error] for which
	// errors.Is(err, [ErrCircuitOpen]) holds, reason "circuit_open",
	// without sending anything, so that the caller can serve a fallback.
	// One request at a time goes out as the probe, at ProbeBackoff or as
	// every sixth request that would be refused, whichever comes first.
	FailFast bool
	// OnStateChange, if set, is called when a host's breaker opens or
	// closes, on the goroutine of the RoundTrip whose attempt changed it,
	// after the change; calls for one host come in order, never at once,
	// and hold up nothing but that host's next transition. It must
	// return quickly. Metrics count the same transitions
	// (retryhttp_breaker_transitions_total, retryhttp_breaker_open_hosts),
	// and a logger gets one Warn record when a breaker opens and one Info
	// when it closes.
	OnStateChange func(BreakerEvent)
}

// BreakerState is a host's breaker state.
type BreakerState string

// The states of a host's breaker.
const (
	BreakerOpen   BreakerState = "open"   // retries to the host are held (FailFast: first attempts refused)
	BreakerClosed BreakerState = "closed" // the host answered: retries go as their waits end
)

// BreakerEvent is a host's breaker changing state, for
// BreakerConfig.OnStateChange.
type BreakerEvent struct {
	Host  string       // the host, in its canonical form (lower case, no default port)
	State BreakerState // the state entered
	Score int          // the host's health score when it changed (open: the threshold; closed: 0)
}

// WithRetryBreaker configures the retry breaker, which is on by default
// with the zero BreakerConfig. While a host is failing, retries to it are
// held instead of sent: one of them at a time goes out as a probe, and
// when any attempt to the host succeeds (a probe, a first attempt, or
// another request's retry), the held retries are released, paced as they
// arrived, so that they come back no faster than they were held. A retry
// that nothing releases within its own backoff schedule gives up with its
// last response. Each breaker state is per host and per Transport. The
// rules are in the package documentation, "Admission".
func WithRetryBreaker(cfg BreakerConfig) Option {
	return Option{apply: func(c *config) error {
		name := func(field string, v any) string { return fmt.Sprintf("WithRetryBreaker(%s: %v)", field, v) }
		switch {
		case cfg.Threshold < 0:
			return optErr(name("Threshold", cfg.Threshold), "threshold is negative")
		case cfg.Threshold > maxThreshold:
			return optErr(name("Threshold", cfg.Threshold), "threshold is above %d", maxThreshold)
		case cfg.MaxHold < 0:
			return optErr(name("MaxHold", cfg.MaxHold), "hold is negative")
		case cfg.ProbeTimeout < 0:
			return optErr(name("ProbeTimeout", cfg.ProbeTimeout), "timeout is negative")
		}
		if cfg.Disabled {
			c.breaker = nil
			return nil
		}
		c.breaker = &cfg
		return nil
	}, name: "WithRetryBreaker"}
}

// WithoutRetryBreaker turns the retry breaker off: every retry is sent
// when its wait ends, limited by the budget alone, and FailFast is off too.
func WithoutRetryBreaker() Option {
	return Option{apply: func(c *config) error {
		c.breaker = nil
		return nil
	}, name: "WithoutRetryBreaker"}
}

// resolveBreaker fills in the defaults once the retry schedule is known.
func resolveBreaker(cfg BreakerConfig, schedule time.Duration) *BreakerConfig {
	if cfg.Threshold == 0 {
		cfg.Threshold = DefaultBreakerThreshold
	}
	if cfg.ProbeBackoff == nil {
		if cfg.FailFast {
			cfg.ProbeBackoff = equalJitter{DefaultFailFastProbeBase, DefaultFailFastProbeMax}
		} else {
			lo := max(schedule/5, time.Millisecond)
			cfg.ProbeBackoff = uniformBackoff{lo, max(schedule/4, lo)}
		}
	}
	return &cfg
}

// uniformBackoff draws every delay uniformly in [lo, hi].
type uniformBackoff struct{ lo, hi time.Duration }

func (u uniformBackoff) Delay(int, time.Duration) time.Duration { return uniform(u.lo, u.hi) }

// circuit is one host's breaker state and hold queue. It is guarded by its
// hostState's mutex; the hostState mirrors open in an atomic, for the
// lock-free read on every attempt.
type circuit struct {
	open      bool
	changed   chan struct{} // closed, and replaced, when held retries should look again
	probing   uint64        // the ticket of the probe in flight, 0 if none
	probeEnd  time.Time     // when the probe in flight counts as failed
	probes    int           // probes (and failures) since the breaker opened or retries were first held
	prevProbe time.Duration
	nextProbe time.Time
	refused   int       // FailFast: requests refused since the last probe
	held      []*holder // retries held now, oldest first
	// lastFail is the sequence number (hostState.seq) of the latest
	// attempt that was sent while retries were held and failed: a held
	// retry whose number is below it has seen the host fail since.
	lastFail uint64
}

// holder is one held retry.
type holder struct {
	since     time.Time // when it was held
	notBefore time.Time // its own wait ends: it is never sent earlier
	limit     time.Time
	seq       uint64 // hostState.seq when it was held
	wake      chan struct{}
	released  bool      // a success released it: it goes at turn
	turn      time.Time // set when released
}

// failFastEvery makes every failFastEvery-th request that an open FailFast
// breaker would refuse its probe, if the probe backoff has not come first:
// probes follow the traffic, a sixth of it at most, so that a busy client
// sees a recovery within a few of its requests and a quiet one within its
// probe backoff.
const failFastEvery = 6

// freeProbeHeld is how many held retries make a probe free of the budget:
// it answers for all of them, so it saves more than it costs. A probe for
// fewer (an instance of a large fleet, with little traffic of its own) is
// charged like any retry, so that probes cannot add up across a fleet.
const freeProbeHeld = 4

func (cb *circuit) signal() {
	if cb.changed != nil {
		close(cb.changed)
	}
	cb.changed = make(chan struct{})
}

// trip opens the circuit.
func (cb *circuit) trip(cfg *BreakerConfig, now time.Time) {
	if cb.open {
		return
	}
	cb.open = true
	if len(cb.held) == 0 {
		cb.probes, cb.prevProbe = 0, 0
	}
	cb.schedule(cfg, now)
}

// schedule sets when the next probe may go: a probe interval after now,
// the time of the last failure.
func (cb *circuit) schedule(cfg *BreakerConfig, now time.Time) {
	d := max(cfg.ProbeBackoff.Delay(cb.probes+1, cb.prevProbe), 0)
	cb.prevProbe = d
	cb.nextProbe = now.Add(d)
}

// failed records a failed attempt while the circuit is open or retries are
// held: it is as good as a probe, and the next probe waits.
func (cb *circuit) failed(cfg *BreakerConfig, now time.Time, seq, ticket uint64) {
	cb.lastFail = max(cb.lastFail, seq)
	if ticket != 0 && cb.probing == ticket {
		cb.probing = 0
	}
	cb.probes++
	cb.schedule(cfg, now)
	cb.wakeDue(now)
}

// wakeDue wakes the held retries that have something to decide: those
// past their limit (give up, or probe), and the first in line to probe.
// The others sleep on, so that a failure costs one wake, not one per
// held retry.
func (cb *circuit) wakeDue(now time.Time) {
	first := true
	for _, w := range cb.held {
		due := !now.Before(w.limit)
		if first && !now.Before(w.notBefore) {
			due, first = true, false
		}
		if due {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
}

// probeEnded ends a probe that told nothing (its caller gave up, or the
// base panicked): another may go at once.
func (cb *circuit) probeEnded(ticket uint64, now time.Time) {
	if ticket != 0 && cb.probing == ticket {
		cb.probing = 0
		cb.wakeDue(now)
	}
}

// expire counts a probe that outlived its timeout as failed, and reports
// whether there was one.
func (cb *circuit) expire(cfg *BreakerConfig, now time.Time, seq uint64) bool {
	if cb.probing != 0 && !now.Before(cb.probeEnd) {
		cb.failed(cfg, now, seq, cb.probing)
		return true
	}
	return false
}

// claimProbe makes ticket the probe in flight.
func (cb *circuit) claimProbe(cfg *BreakerConfig, now time.Time, ticket uint64) {
	timeout := cfg.ProbeTimeout
	if timeout == 0 {
		timeout = max(probeTimeoutFactor*cb.prevProbe, minProbeTimeout)
	}
	cb.probing, cb.probeEnd, cb.refused = ticket, now.Add(timeout), 0
}

// release closes the circuit, if open, and releases every held retry,
// paced: each goes as long after now as it was due (its own wait's end,
// or when it was held, if later) after the earliest due of them, but no
// later than halfway to its limit, and never before its own wait ends.
// The held retries so come back at the pace of their own schedules, as a
// ramp, not a wave, even when they were all held in one instant.
func (cb *circuit) release(now time.Time) {
	cb.open, cb.probing = false, 0
	if len(cb.held) > 0 {
		due := func(w *holder) time.Time {
			if w.notBefore.After(w.since) {
				return w.notBefore
			}
			return w.since
		}
		first := due(cb.held[0])
		for _, w := range cb.held[1:] {
			if d := due(w); d.Before(first) {
				first = d
			}
		}
		for _, w := range cb.held {
			turn := now.Add(min(due(w).Sub(first), max(w.limit.Sub(now), 0)/2))
			if turn.Before(w.notBefore) {
				turn = w.notBefore
			}
			w.released, w.turn = true, turn
		}
		clear(cb.held)
		cb.held = cb.held[:0]
	}
	cb.signal()
}

// remove takes w out of the queue, if it is still in it.
func (cb *circuit) remove(w *holder) {
	for i, x := range cb.held {
		if x == w {
			cb.held = append(cb.held[:i], cb.held[i+1:]...)
			cb.held = cb.held[:len(cb.held):len(cb.held)]
			return
		}
	}
}

// probeDue reports whether w may go as the probe now: none is in flight,
// w is the oldest held retry whose own wait has ended, and the probe
// schedule says so, or w has reached its limit.
func (cb *circuit) probeDue(w *holder, now time.Time) bool {
	if cb.probing != 0 || now.Before(w.notBefore) {
		return false
	}
	if !now.Before(w.limit) {
		return true
	}
	if now.Before(cb.nextProbe) {
		return false
	}
	for _, x := range cb.held {
		if !now.Before(x.notBefore) {
			return x == w
		}
	}
	return false
}

// nextEvent is when w should look again by itself: its limit, its own
// wait, the end of the probe in flight, or the probe time if it is first
// in line. Past its limit, it waits for the probe in flight (or a wake).
func (cb *circuit) nextEvent(w *holder, now time.Time) time.Time {
	t := now.Add(time.Hour)
	if now.Before(w.limit) {
		t = w.limit
	}
	if now.Before(w.notBefore) && w.notBefore.Before(t) {
		t = w.notBefore
	}
	if cb.probing != 0 && now.Before(cb.probeEnd) && cb.probeEnd.Before(t) {
		t = cb.probeEnd
	}
	if cb.probing == 0 && cb.nextProbe.Before(t) {
		at := cb.nextProbe
		if at.Before(now) {
			at = now
		}
		for _, x := range cb.held {
			if !at.Before(x.notBefore) {
				if x == w && now.Before(at) {
					t = at
				}
				break
			}
		}
	}
	return t
}
