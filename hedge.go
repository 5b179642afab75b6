// This file holds hedging (WithHedging): a first attempt that is slow to
// answer gets a copy sent beside it, and the first answer worth returning
// wins. Only requests that may be repeated are hedged, and whether a hedge
// goes is admission's (internal/admission): hedges spend the host's budget and stop
// while its breaker is open, so that hedging turns itself off when the
// host is overloaded.

package retryhttp

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"
)

// Hedging's defaults and bounds, as HedgeConfig documents them.
const (
	defaultHedgePercentile = 0.95
	defaultHedgeMaxExtra   = 1
	// maxHedgeExtra bounds HedgeConfig.MaxExtra: each copy is a request
	// to a host that is already slow.
	maxHedgeExtra = 8
)

// HedgeConfig configures WithHedging. A zero field takes its default.
type HedgeConfig struct {
	// Delay is how long a first attempt may go unanswered before a copy is
	// sent. The default, 0, follows the host: the Percentile of the
	// latencies of its recent successful first attempts (no hedge until
	// 20 have been seen).
	Delay time.Duration
	// Percentile of the host's recent latencies that makes the delay,
	// in (0, 1). Default 0.95.
	Percentile float64
	// MaxExtra is how many copies may be sent beside the first attempt,
	// each a delay after the previous one. Default 1, at most 8.
	MaxExtra int
}

// WithHedging sends a copy of a first attempt that has not been answered
// after a delay, and returns the first answer worth returning; the others
// are cancelled, drained and closed before RoundTrip returns. Only
// requests that may be repeated, with no body or a GetBody, and more than
// one attempt allowed, are hedged. Each hedge spends the host's budget,
// and none goes while the host's breaker is open or retries are held
// (docs/overload.md). The default is no hedging.
func WithHedging(cfg HedgeConfig) Option {
	return option("WithHedging", func(c *config) error {
		name := func(field string, v any) string { return fmt.Sprintf("WithHedging(%s: %v)", field, v) }
		switch {
		case cfg.Delay < 0:
			return optErr(name("Delay", cfg.Delay), "delay is negative")
		case math.IsNaN(cfg.Percentile) || cfg.Percentile < 0 || cfg.Percentile >= 1:
			return optErr(name("Percentile", cfg.Percentile), "percentile must be in (0, 1)")
		case cfg.MaxExtra < 0:
			return optErr(name("MaxExtra", cfg.MaxExtra), "extra copies are negative")
		case cfg.MaxExtra > maxHedgeExtra:
			return optErr(name("MaxExtra", cfg.MaxExtra), "more than %d extra copies", maxHedgeExtra)
		}
		if cfg.Percentile == 0 {
			cfg.Percentile = defaultHedgePercentile
		}
		if cfg.MaxExtra == 0 {
			cfg.MaxExtra = defaultHedgeMaxExtra
		}
		c.hedge = &cfg
		return nil
	})
}

// copyResult is what one copy of a hedged attempt ended with, before it
// is classified (on the goroutine of RoundTrip).
type copyResult struct {
	resp     *http.Response
	err      error
	timedOut bool
	panicked any // what the base panicked with, if it did
	a        *prepared
	cancel   context.CancelCauseFunc
	idx      int           // 0 for the first attempt, 1... for the hedges
	took     time.Duration // from the copy's own start to its answer
}

// hedged sends the first attempt, and copies of it while it is slow to
// answer, and returns the first answer worth returning.
func (k *call) hedged(body io.ReadCloser) result {
	delay, ok := k.hedgeDelay()
	if !ok {
		return k.unhedged(body)
	}
	h := hedging{results: make(chan copyResult, 1+k.c.hedge.MaxExtra)}
	defer h.finish(k)
	h.launch(k, body)
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case cr := <-h.results:
			if r, done := h.received(k, cr); done {
				return r
			}
		case <-timer.C:
			if h.another(k) {
				timer.Reset(delay)
			}
		}
	}
}

// hedgeDelay is how long a first attempt may go unanswered before a copy
// is sent: HedgeConfig.Delay, or the host's percentile; ok is false when
// no copy may go (no delay known yet, a request that may not be repeated,
// or a body that only a tee could replay).
func (k *call) hedgeDelay() (time.Duration, bool) {
	c, cfg := k.c, k.c.hedge
	delay := cfg.Delay
	if delay == 0 {
		delay = k.hedgeAfter
	}
	return delay, delay > 0 && c.maxAttempts >= 2 && k.replayable && (k.body.mode == bodyNone || k.body.mode == bodyGetBody)
}

// received takes a copy's result: the first answer worth returning wins
// (done), as does the last copy's; a failure worth retrying is kept while
// other copies are out. A copy's panic is the caller's.
func (h *hedging) received(k *call, cr copyResult) (result, bool) {
	h.pending--
	if cr.panicked != nil {
		h.dropLast(k)
		h.finish(k)
		panic(cr.panicked)
	}
	var r result
	k.classify(&r, cr.resp, cr.err, cr.timedOut)
	h.dropLast(k)
	if (r.err == nil && !r.retryable) || h.pending == 0 {
		return h.keep(k, cr, r), true
	}
	h.last, h.lastR, h.hasLast = cr, r, true
	return result{}, false
}

// dropLast lets go of the failure kept, if any.
func (h *hedging) dropLast(k *call) {
	if h.hasLast {
		k.dropCopy(h.last, h.lastR)
		h.hasLast = false
	}
}

// another sends another copy, if the limit, admission and the body let
// it go.
func (h *hedging) another(k *call) bool {
	c := k.c
	if h.extra >= c.hedge.MaxExtra || k.body.open.Busy() || !k.t.Hedge() {
		// A body still being sent is a slow upload, which a copy would
		// not speed up; and GetBody may rewind the reader it is sent from.
		return false
	}
	next, err := k.body.next(k.ctx, k.req, time.Time{}) // not Busy: nothing to wait for
	if err != nil {
		return false
	}
	h.extra++
	c.metrics.hedge()
	h.launch(k, next)
	return true
}

// unhedged sends a first attempt that is not hedged (its latency, if it
// succeeds, is admission's to record: Done).
func (k *call) unhedged(body io.ReadCloser) result {
	a := k.prepare(k.ctx, false, 1, body, false)
	resp, timedOut, err := k.c.transmit(&a)
	k.hookEnd = a.end
	var r result
	k.classify(&r, resp, err, timedOut)
	return r
}

// hedging is the copies of one hedged attempt.
type hedging struct {
	results        chan copyResult
	cancels        []context.CancelCauseFunc
	pending, extra int
	last           copyResult // a failure worth retrying, kept while other copies are out
	lastR          result
	hasLast        bool
}

// launch prepares a copy on the goroutine of RoundTrip and sends it
// through the base on a goroutine of its own.
func (h *hedging) launch(k *call, b io.ReadCloser) {
	ctx, cancel := context.WithCancelCause(k.ctx)
	idx := len(h.cancels)
	h.cancels = append(h.cancels, cancel)
	h.pending++
	a := k.prepare(ctx, true, 1, b, idx > 0)
	c, results := k.c, h.results
	go func() {
		t0 := time.Now()
		cr := copyResult{a: &a, cancel: cancel, idx: idx}
		defer func() {
			if p := recover(); p != nil {
				cr.panicked = p
			}
			cr.took = time.Since(t0)
			results <- cr
		}()
		cr.resp, cr.timedOut, cr.err = c.transmit(&a)
	}()
}

// keep keeps the winning copy and cancels the others, which finish drops.
// The winner's context lives until its body is closed.
func (h *hedging) keep(k *call, win copyResult, r result) result {
	k.hookEnd = win.a.end
	if r.err == nil && !r.retryable {
		// The winner's own latency, not the request's: a hedge's wait
		// before it was sent is no latency of the host's (Done records it).
		k.latency = win.took
		if win.idx > 0 {
			k.c.metrics.hedgeWon()
		}
	}
	for i, cancel := range h.cancels {
		if i != win.idx {
			cancel(context.Canceled)
		}
	}
	if r.resp != nil {
		r.resp.Body = wrapCancel(r.resp.Body, win.cancel)
	} else {
		win.cancel(context.Canceled)
	}
	h.cancels[win.idx] = func(error) {} // the winner's lives on with its body
	return r
}

// finish cancels the copies still out and waits for them, so that every
// callback of theirs runs on the goroutine of RoundTrip, and none is left
// running when it returns. A copy that panicked after the answer was had
// is dropped: its panic has nobody to reach.
func (h *hedging) finish(k *call) {
	for _, cancel := range h.cancels {
		cancel(context.Canceled)
	}
	for ; h.pending > 0; h.pending-- {
		cr := <-h.results
		if cr.panicked != nil {
			cr.cancel(context.Canceled)
			k.c.metrics.attempt(outcomeError) // sent, all the same
			continue
		}
		var r result
		k.classify(&r, cr.resp, cr.err, cr.timedOut)
		k.dropCopy(cr, r)
	}
}

// dropCopy discards a copy that lost: its response is drained and closed,
// its context ended, and it is counted as an attempt.
func (k *call) dropCopy(cr copyResult, r result) {
	if r.resp != nil {
		discard(r.resp)
	}
	cr.cancel(context.Canceled)
	k.c.metrics.attempt(r.outcome)
	if cr.a.end != nil {
		cr.a.end(AttemptEnd{Err: r.err, Outcome: r.outcome.String(), Retryable: r.retryable, End: time.Now()})
	}
}
