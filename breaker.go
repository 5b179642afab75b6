// This file holds the retry breaker: per host, while first attempts mostly
// fail, retries are held instead of sent, one of them goes out as a probe
// at backoff intervals, and the held ones are released, spread with
// jitter, once an attempt succeeds. The loop calls it from transport.go.

package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// BreakerConfig configures the retry breaker of WithRetryBreaker. A zero
// field takes its default.
type BreakerConfig struct {
	// Threshold trips the breaker for a host: each first attempt that
	// fails in a way worth retrying adds 1 to the host's failure score,
	// each attempt that succeeds takes 2 off (down to 0), and the breaker
	// opens when the score reaches Threshold. Only first attempts add, so
	// that one request's retries alone can never trip it, and it trips
	// only while clearly more than two attempts in three fail. Default 10.
	Threshold int
	// ProbeBackoff spaces the probes while the breaker is open: the n-th
	// probe goes out ProbeBackoff.Delay(n, prev) after the breaker opened
	// or the previous probe failed. Default EqualJitter(200ms, 5s).
	ProbeBackoff Backoff
	// ReleaseSpread spreads the retries released when the breaker closes
	// uniformly over [0, ReleaseSpread], so that they do not come back as
	// one wave. Default 500ms.
	ReleaseSpread time.Duration
	// MaxHold is the longest a retry is held; the request then gives up
	// with its last response, reason "breaker". A context deadline that
	// comes sooner ends the hold sooner. Default 30s.
	MaxHold time.Duration
}

// WithRetryBreaker turns on the retry breaker (it is off by default).
// While a host is failing across many requests, their retries are not
// sent one by one: they are held, a single probe (one of them) goes out at
// backoff intervals, and when a probe or any other attempt succeeds the
// held retries are released, spread with jitter. First attempts are never
// held. A held retry is not charged to the Budget, and a released one is
// sent without charge, paced by the spread instead: the breaker is what
// lets every request succeed after a short outage without amplifying a
// long one. Each held retry stays bounded by its request's context
// deadline, its attempts and MaxHold.
func WithRetryBreaker(cfg BreakerConfig) Option {
	return Option{func(c *config) error {
		switch {
		case cfg.Threshold < 0:
			return optErr(fmt.Sprintf("WithRetryBreaker(Threshold: %d)", cfg.Threshold), "threshold is negative")
		case cfg.ReleaseSpread < 0:
			return optErr(fmt.Sprintf("WithRetryBreaker(ReleaseSpread: %v)", cfg.ReleaseSpread), "spread is negative")
		case cfg.MaxHold < 0:
			return optErr(fmt.Sprintf("WithRetryBreaker(MaxHold: %v)", cfg.MaxHold), "hold is negative")
		}
		if cfg.Threshold == 0 {
			cfg.Threshold = 10
		}
		if cfg.ProbeBackoff == nil {
			cfg.ProbeBackoff = equalJitter{200 * time.Millisecond, 5 * time.Second}
		}
		if cfg.ReleaseSpread == 0 {
			cfg.ReleaseSpread = 500 * time.Millisecond
		}
		if cfg.MaxHold == 0 {
			cfg.MaxHold = 30 * time.Second
		}
		c.breaker = &breaker{cfg: cfg}
		return nil
	}}
}

// GiveUpBreaker: a retry held by the breaker reached MaxHold or the
// context deadline before an attempt succeeded.
const GiveUpBreaker = "breaker"

// ErrBreakerHold is what a request whose last retry was held too long
// ends with when it has no response to return.
var ErrBreakerHold = errors.New("retryhttp: retry held by the breaker until its time ran out")

type breaker struct {
	cfg   BreakerConfig
	hosts hostMap[breakerHost]
}

// breakerHost is one host's breaker. score and open are read on every
// first attempt, without a lock; the rest changes only while the host is
// failing, under mu.
type breakerHost struct {
	score atomic.Int32
	open  atomic.Bool

	mu        sync.Mutex
	released  chan struct{} // closed when the breaker closes
	probing   bool          // a probe is in flight
	probeDone chan struct{} // closed when the probe in flight ends
	probes    int           // probes that failed since the breaker opened
	prevProbe time.Duration
	nextProbe time.Time
}

// holdMode says how a retry that passed the breaker is to be sent.
type holdMode uint8

const (
	sendNow      holdMode = iota // the breaker is closed: an ordinary retry
	sendProbe                    // the breaker is open: this retry is its probe
	sendReleased                 // held, then released by a success: send after a jittered spread
)

// record takes an attempt's outcome. failed is true for an outcome worth
// retrying; first is true for a first attempt, the only kind whose
// failures count towards tripping.
func (b *breaker) record(host string, first, failed bool, now time.Time) {
	h := b.hosts.get(host)
	if !failed {
		// The common case, a healthy host, only reads.
		if h.open.Load() {
			h.close()
		}
		for {
			s := h.score.Load()
			if s == 0 || h.score.CompareAndSwap(s, max(s-2, 0)) {
				return
			}
		}
	}
	if !first {
		return
	}
	for {
		s := h.score.Load()
		if s >= int32(b.cfg.Threshold) {
			break
		}
		if h.score.CompareAndSwap(s, s+1) {
			if s+1 < int32(b.cfg.Threshold) {
				return
			}
			break
		}
	}
	b.trip(h, now)
}

func (b *breaker) trip(h *breakerHost, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open.Load() {
		return
	}
	h.released = make(chan struct{})
	h.probes, h.prevProbe = 0, 0
	h.scheduleProbe(b.cfg.ProbeBackoff, now)
	h.open.Store(true)
}

// scheduleProbe sets when the next probe may go; h.mu is held.
func (h *breakerHost) scheduleProbe(bo Backoff, now time.Time) {
	d := max(bo.Delay(h.probes+1, h.prevProbe), 0)
	h.prevProbe = d
	h.nextProbe = now.Add(d)
}

func (h *breakerHost) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.open.Load() {
		return
	}
	h.open.Store(false)
	h.score.Store(0)
	close(h.released)
	if h.probing {
		h.probing = false
		close(h.probeDone)
	}
}

// probeFailed ends a probe that failed: the next one is scheduled.
func (b *breaker) probeFailed(host string, now time.Time) {
	h := b.hosts.get(host)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.open.Load() || !h.probing {
		return
	}
	h.probing = false
	close(h.probeDone)
	h.probes++
	h.scheduleProbe(b.cfg.ProbeBackoff, now)
}

// isOpen reports whether host's breaker is open.
func (b *breaker) isOpen(host string) bool { return b.hosts.get(host).open.Load() }

// hold is called before a retry is sent. It returns at once while the
// breaker is closed; while it is open, it waits until the retry may go as
// the probe or is released, or until limit (the request's MaxHold and
// deadline) passes, which it reports as ErrBreakerHold, or ctx ends.
//
// A probe is a real attempt of the request that sends it, and a failed one
// uses that attempt up. So that no request runs out of attempts by probing
// while others have more to spare, a retry that would be its request's
// last volunteers as the probe only one probe interval later than others.
func (b *breaker) hold(ctx context.Context, host string, cl clock, limit time.Time, last bool) (holdMode, error) {
	h := b.hosts.get(host)
	held := false
	for range 10000 { // each turn waits for an event or a timer, so this bounds nothing real
		if !h.open.Load() {
			break
		}
		h.mu.Lock()
		if !h.open.Load() {
			h.mu.Unlock()
			break
		}
		now := cl.Now()
		if !now.Before(limit) {
			h.mu.Unlock()
			return sendNow, ErrBreakerHold
		}
		probeAt := h.nextProbe
		if last {
			probeAt = probeAt.Add(h.prevProbe)
		}
		if !h.probing && !now.Before(probeAt) {
			h.probing = true
			h.probeDone = make(chan struct{})
			h.mu.Unlock()
			return sendProbe, nil
		}
		held = true
		released, probeDone := h.released, h.probeDone
		wait := limit.Sub(now)
		if !h.probing {
			wait = min(wait, probeAt.Sub(now))
			probeDone = nil
		}
		h.mu.Unlock()

		t := time.NewTimer(wait)
		select {
		case <-released:
		case <-probeDone:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return sendNow, ctx.Err()
		}
		t.Stop()
	}
	switch {
	case h.open.Load():
		return sendNow, ErrBreakerHold
	case held:
		return sendReleased, nil
	}
	return sendNow, nil
}
