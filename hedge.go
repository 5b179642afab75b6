// This file holds hedging (WithHedging): a first attempt that is slow to
// answer gets a copy sent beside it, and the first answer worth returning
// wins. Only requests that may be repeated are hedged, and hedges spend the
// host's budget and stop while its breaker is open, so that hedging turns
// itself off when the host is overloaded.

package retryhttp

import (
	"context"
	"fmt"
	"io"
	"math/bits"
	"sync/atomic"
	"time"
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
	// each a delay after the previous one. Default 1.
	MaxExtra int
}

// WithHedging sends a copy of a first attempt that has not been answered
// after a delay, and returns the first answer worth returning (a success,
// or an answer that is not worth retrying); the others are cancelled, and
// their bodies drained and closed. Each copy gets its own body (GetBody, or
// no body) and the same Idempotency-Key. Only requests that may be
// repeated are hedged (an idempotent method, or a key), and only those with
// no body or a GetBody. Each hedge spends the host's retry budget, and none
// is sent while the host's breaker is open. The default is no hedging.
func WithHedging(cfg HedgeConfig) Option {
	return Option{apply: func(c *config) error {
		switch {
		case cfg.Delay < 0:
			return optErr(fmt.Sprintf("WithHedging(Delay: %v)", cfg.Delay), "delay is negative")
		case cfg.Percentile < 0 || cfg.Percentile >= 1:
			return optErr(fmt.Sprintf("WithHedging(Percentile: %v)", cfg.Percentile), "percentile must be in (0, 1)")
		case cfg.MaxExtra < 0:
			return optErr(fmt.Sprintf("WithHedging(MaxExtra: %d)", cfg.MaxExtra), "extra copies are negative")
		}
		if cfg.Percentile == 0 {
			cfg.Percentile = 0.95
		}
		if cfg.MaxExtra == 0 {
			cfg.MaxExtra = 1
		}
		c.hedge = &hedger{cfg: cfg}
		return nil
	}, name: "WithHedging"}
}

type hedger struct {
	cfg   HedgeConfig
	hosts hostMap[latencies]
}

// latencies is a host's recent latencies of successful first attempts: a
// histogram of 4 buckets per doubling from 1µs, halved every 1,024
// samples so that it follows the host.
type latencies struct {
	counts [160]atomic.Uint32
	total  atomic.Uint32
}

const minHedgeSamples = 20

func latencyBucket(d time.Duration) int {
	us := uint64(max(d/time.Microsecond, 1))
	exp := bits.Len64(us) - 1 // 2^exp <= us
	frac := 0
	if exp >= 2 {
		frac = int(us>>(exp-2)) & 3
	}
	return min(exp*4+frac, 159)
}

// bucketTop is the upper bound of a bucket.
func bucketTop(i int) time.Duration {
	exp, frac := i/4, i%4
	us := (uint64(1) << exp) * uint64(4+frac+1) / 4
	return time.Duration(us) * time.Microsecond
}

func (l *latencies) record(d time.Duration) {
	l.counts[latencyBucket(d)].Add(1)
	if l.total.Add(1) >= 1024 {
		l.total.Store(0)
		for i := range l.counts {
			l.counts[i].Store(l.counts[i].Load() / 2)
		}
		var t uint32
		for i := range l.counts {
			t += l.counts[i].Load()
		}
		l.total.Store(t)
	}
}

// percentile returns the p-th percentile, or 0 with too few samples.
func (l *latencies) percentile(p float64) time.Duration {
	var n uint32
	for i := range l.counts {
		n += l.counts[i].Load()
	}
	if n < minHedgeSamples {
		return 0
	}
	want := uint32(p * float64(n))
	var sum uint32
	for i := range l.counts {
		if sum += l.counts[i].Load(); sum > want {
			return bucketTop(i)
		}
	}
	return bucketTop(len(l.counts) - 1)
}

// copyResult is what one copy of a hedged attempt ended with.
type copyResult struct {
	r      result
	end    func(AttemptEnd)
	cancel context.CancelCauseFunc
	idx    int           // 0 for the first attempt, 1... for the hedges
	took   time.Duration // from the copy's own start to its answer
}

// hedged sends the first attempt, and copies of it while it is slow to
// answer, and returns the first answer worth returning.
func (k *call) hedged(body io.ReadCloser) result {
	c, h := k.c, k.c.hedge
	var buf [maxHostKey]byte
	key, kb := canonicalHost(k.req.URL.Scheme, k.host, &buf)
	lat := h.hosts.getKey(key, kb, c.clock.Second())
	delay := h.cfg.Delay
	if delay == 0 {
		delay = lat.percentile(h.cfg.Percentile)
	}
	start := c.clock.Now()
	if delay <= 0 || !k.replayable || (k.mode != bodyNone && k.mode != bodyGetBody) {
		resp, timedOut, end, err := k.send(k.ctx, 1, body, false)
		k.hookEnd = end
		r := k.classify(resp, err, timedOut)
		if r.err == nil && !r.retryable {
			lat.record(c.clock.Now().Sub(start))
		}
		return r
	}

	// The copies run on goroutines of their own, with a copy of the call:
	// k itself stays in RoundTrip's frame, so that a request that is not
	// hedged allocates nothing for it.
	kc := new(call)
	*kc = *k
	results := make(chan copyResult, 1+h.cfg.MaxExtra)
	var cancels []context.CancelCauseFunc
	launch := func(b io.ReadCloser) {
		ctx, cancel := context.WithCancelCause(kc.ctx)
		idx := len(cancels)
		cancels = append(cancels, cancel)
		go func() {
			t0 := kc.c.clock.Now()
			resp, timedOut, end, err := kc.send(ctx, 1, b, idx > 0)
			took := kc.c.clock.Now().Sub(t0)
			results <- copyResult{kc.classify(resp, err, timedOut), end, cancel, idx, took}
		}()
	}
	launch(body)
	pending, extra := 1, 0
	timer := time.NewTimer(delay)
	defer timer.Stop()
	var last *copyResult
	for pending > 0 {
		select {
		case cr := <-results:
			pending--
			if (cr.r.err == nil && !cr.r.retryable) || pending == 0 {
				if last != nil {
					k.dropCopy(*last)
				}
				return k.keepCopy(kc, cr, cancels, results, pending, lat)
			}
			// A failure worth retrying while other copies are out: keep
			// it, and wait for them.
			if last != nil {
				k.dropCopy(*last)
			}
			last = &cr
		case <-timer.C:
			if extra >= h.cfg.MaxExtra || !k.mayHedge() {
				continue
			}
			next, err := k.nextBody()
			if err != nil {
				continue
			}
			extra++
			pending++
			c.metrics.hedge()
			launch(next)
			timer.Reset(delay)
		}
	}
	return last.r // not reached: the loop returns when pending reaches 0
}

// mayHedge asks the breaker and the budget for a hedge.
func (k *call) mayHedge() bool {
	if k.breaker != nil && k.breaker.open.Load() {
		return false
	}
	return k.budget == nil || k.c.budget.allow(k.budget, k.c.clock.Second())
}

// keepCopy keeps the winning copy, cancels the others and cleans up after
// them in the background. The winner's context lives until its body is
// closed.
func (k *call) keepCopy(kc *call, win copyResult, cancels []context.CancelCauseFunc, results chan copyResult,
	pending int, lat *latencies) result {
	k.hookEnd = win.end
	if win.r.err == nil && !win.r.retryable {
		// The winner's own latency, not the request's: a hedge's wait
		// before it was sent is no latency of the host's.
		lat.record(win.took)
		if win.idx > 0 {
			k.c.metrics.hedgeWon()
		}
	}
	for i, cancel := range cancels {
		if i != win.idx {
			cancel(context.Canceled)
		}
	}
	if win.r.resp != nil {
		win.r.resp.Body = wrapCancel(win.r.resp.Body, win.cancel)
	} else {
		win.cancel(context.Canceled)
	}
	if pending > 0 {
		go func() {
			for range pending {
				kc.dropCopy(<-results)
			}
		}()
	}
	return win.r
}

// dropCopy discards a copy that lost: its response is drained and closed,
// its context ended, and it is counted as an attempt.
func (k *call) dropCopy(cr copyResult) {
	if cr.r.resp != nil {
		discard(cr.r.resp)
	}
	cr.cancel(context.Canceled)
	k.c.metrics.attempt(cr.r.outcome)
	if cr.end != nil {
		cr.end(AttemptEnd{Err: cr.r.err, Outcome: cr.r.outcome.String(), Retryable: cr.r.retryable})
	}
}
