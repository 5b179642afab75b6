// This file holds the Transport and its retry loop. The loop reads as:
// send an attempt, record it once, stop unless it failed in a way worth
// retrying, decide (decide.go), wait, next attempt. What each step needs is
// elsewhere: attempt.go (the call and its attempts), decide.go (the give-up
// ladder), breaker.go and budget.go (per-host state), report.go (metrics,
// logs, hook), errors.go (reasons and errors), policy.go (options).

package retryhttp

import (
	"io"
	"net/http"
	"time"
)

// Transport is an [http.RoundTripper] that retries failed requests on its
// base RoundTripper. Which requests and outcomes are retried, and how it
// waits, is set by the Options given to [New] and documented on each one.
//
// A Transport is safe for concurrent use by multiple goroutines. The zero
// Transport behaves as New(nil): it retries with the defaults over a
// pooled transport shared by every zero Transport, the way the zero
// [http.Client] uses [http.DefaultTransport].
type Transport struct {
	c *config
}

// New returns a Transport that sends each attempt through base, or through
// cleanhttp.DefaultPooledTransport() if base is nil. It panics, naming the
// option, if an option is invalid, as [regexp.MustCompile] does for a bad
// pattern: a misconfigured retry policy is a programming error.
//
// If base is, or wraps, another Transport, only the new one retries; see
// "Nested Transports" in the package documentation.
func New(base http.RoundTripper, opts ...Option) *Transport {
	c, err := newConfig(base, opts)
	if err != nil {
		panic(err)
	}
	return &Transport{c: c}
}

// NewClient returns &http.Client{Transport: New(nil, opts...)}.
func NewClient(opts ...Option) *http.Client {
	return &http.Client{Transport: New(nil, opts...)}
}

func (t *Transport) config() *config {
	if t.c != nil {
		return t.c
	}
	return defaultConfig()
}

// CloseIdleConnections closes the idle connections of the base
// RoundTripper, if it has such a method.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	if ci, ok := t.config().base.(closeIdler); ok {
		ci.CloseIdleConnections()
	}
}

// Unwrap returns the base RoundTripper, for middleware that looks through
// a chain of RoundTrippers.
func (t *Transport) Unwrap() http.RoundTripper { return t.config().base }

// RoundTrip sends req and retries it when that is both safe and useful.
//
// It retries a request whose method is idempotent (GET, HEAD, OPTIONS,
// TRACE, PUT, DELETE) or that carries an Idempotency-Key or
// X-Idempotency-Key header, on 408, 429 and 5xx other than 501, 505, 506,
// 508, 510 and 511, and on transport errors other than certificate and
// handshake refusals; any request, whatever its method, when the
// connection could not be established at all. It never modifies req:
// headers it adds go on a copy.
//
// When retrying ends, RoundTrip returns the last response with a nil error
// if there was one, its body unread, so the caller sees the real status;
// otherwise an [*Error] that says how many attempts were made and wraps
// the last error.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.config()
	if req.URL == nil || req.Header == nil ||
		(req.URL.Scheme != "http" && req.URL.Scheme != "https") || owned(req.Context()) {
		// Malformed, not HTTP, or an outer Transport owns the retries:
		// one attempt, and the base's own answer.
		return c.send(req)
	}
	return c.forRequest(req.Context()).roundTrip(req)
}

func (c *config) roundTrip(req *http.Request) (*http.Response, error) {
	var k call
	body, err := c.newCall(&k, req)
	if err != nil {
		return nil, err
	}
	if k.tee != nil {
		defer k.tee.release()
	}
	if k.breaker != nil && !k.admit() {
		closeBody(body)
		return k.giveUp(GiveUpCircuitOpen, 0, &result{err: ErrCircuitOpen}, 0)
	}
	var prev time.Duration
	for attempt := 1; ; attempt++ {
		r := k.attempt(attempt, body)
		k.record(&r)
		if !r.retryable {
			k.endAttempt(&r, AttemptEnd{})
			if r.err != nil {
				return nil, &Error{Attempts: attempt, Err: r.err}
			}
			return r.resp, nil
		}
		f := k.facts(attempt, &r, prev)
		v := decide(f)
		var next io.ReadCloser
		if v.giveUp == "" {
			next, v = k.acquire(v, &r)
		}
		if v.giveUp != "" {
			return k.giveUp(v.giveUp, attempt, &r, v.delay)
		}
		k.scheduled(attempt, v.delay, &r)
		k.endAttempt(&r, AttemptEnd{Retried: true, NextDelay: v.delay})
		k.lastDelay = v.delay
		if reason, err := k.wait(attempt, v.delay, &r); reason != "" || err != nil {
			closeBody(next)
			if err != nil {
				return nil, &Error{Attempts: attempt, Err: err}
			}
			return k.giveUp(reason, attempt, &r, 0)
		}
		prev, body = f.backoff, next // the Backoff's own last value, not Retry-After's
	}
}

// facts gathers what decide needs about attempt n's result.
func (k *call) facts(n int, r *result, prev time.Duration) facts {
	c := k.c
	f := facts{
		attempt: n, maxAttempts: c.maxAttempts,
		replayable: k.replayable, notSent: r.notSent,
		bodyOnce: k.mode == bodyOnce && c.maxAttempts > 1, // with one attempt, the reason is attempts
		maxRA:    c.maxRetryAfter,
	}
	if f.replayable || f.notSent {
		f.backoff = c.backoff.Delay(n, prev)
	}
	now := c.clock.Now()
	if n == 1 {
		k.firstFail = now
	}
	if r.resp != nil {
		f.retryAfter, f.hasRA = ParseRetryAfter(r.resp.Header.Get("Retry-After"), now)
	}
	if dl, ok := k.ctx.Deadline(); ok {
		f.untilDL, f.hasDL = dl.Sub(now), true
	}
	if c.maxElapsed > 0 {
		f.untilME, f.hasME = k.start.Add(c.maxElapsed).Sub(now), true
	}
	return f
}

// acquire takes the two rungs of the ladder that act: it fetches the next
// attempt's body, then spends the budget.
func (k *call) acquire(v verdict, r *result) (io.ReadCloser, verdict) {
	next, err := k.nextBody()
	if err != nil {
		return nil, verdict{GiveUpBody, 0}
	}
	if !k.spend(r) {
		closeBody(next)
		return nil, verdict{GiveUpBudget, v.delay}
	}
	return next, v
}

// spend asks the budget for a retry. A request that never left the client
// cost the server nothing, so its retry is free; a retry that the open
// breaker will hold is charged later, if it goes out as the probe. A
// retry that the budget refuses because the host is failing (it has
// withdrawn its floor) asks again when its wait ends: by then the breaker
// may hold it instead (the first failures of a burst come before it has
// opened).
func (k *call) spend(r *result) bool {
	k.charged = false
	switch {
	case k.budget == nil || r.notSent:
		return true
	case k.breaker != nil && k.breaker.open.Load():
		return true
	}
	if k.c.budget.allow(k.budget, k.c.clock.Second()) {
		k.charged = true
		return true
	}
	h := k.breaker
	return h != nil && !h.b.cfg.FailFast && k.budget.streak.Load() >= failingAfter
}

// wait sleeps before the next attempt, then passes the breaker. It keeps
// r's response only if the breaker may hold the retry and give up later.
func (k *call) wait(attempt int, delay time.Duration, r *result) (GiveUpReason, error) {
	c := k.c
	if r.resp != nil {
		if k.breaker == nil || !detach(r.resp) {
			discard(r.resp)
			r.resp = nil
		}
	}
	if k.breaker != nil && k.breaker.open.Load() && !k.breaker.b.cfg.FailFast {
		// A retry that will be held waits no longer than its hold.
		delay = min(delay, max(k.holdLimit().Sub(c.clock.Now()), 0))
	}
	if err := c.clock.Sleep(k.ctx, delay); err != nil {
		return "", err
	}
	if k.breaker == nil {
		return "", nil
	}
	return k.passBreaker(attempt, delay, r)
}
