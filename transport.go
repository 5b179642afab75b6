// This file holds the Transport and its retry loop. The loop reads as:
// send an attempt, record it once, stop unless it failed in a way worth
// retrying, decide (decide.go), wait, next attempt. What each step needs is
// elsewhere: attempt.go (the call and its attempts), decide.go (the give-up
// ladder), internal/admission (the per-host controllers: budget, breaker
// and pacers, over the host's health; their options in overload.go),
// report.go (metrics, logs and the attempt hook), errors.go
// (reasons and errors), options.go and config.go (options).

package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/admission"
	"github.com/retryhttp/retryhttp/internal/ratelimit"
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
	if t != nil && t.c != nil {
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
	rc, err := c.forRequest(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &Error{Err: err}
	}
	return rc.roundTrip(req)
}

func (c *config) roundTrip(req *http.Request) (*http.Response, error) {
	var k call
	body := c.newCall(&k, req)
	if k.body.tee != nil {
		defer k.body.tee.Release()
	}
	ev := k.run(body)
	return k.finish(&ev)
}

// run sends the request's attempts until one of them, or admission, ends
// it, and says how: the event that is reported once.
func (k *call) run(body io.ReadCloser) event {
	if k.t.Known() {
		if reason, err := reasonOf(k.c.gate.AdmitFirst(&k.t)); reason != "" || err != nil {
			closeBody(body)
			return refused(reason, err)
		}
	}
	var prev time.Duration
	for attempt := 1; ; attempt++ {
		r := k.attempt(attempt, body)
		k.record(&r)
		if !r.retryable {
			return event{kind: evEnd, attempt: attempt, r: r}
		}
		var ended event
		var done bool
		if body, prev, ended, done = k.retry(attempt, &r, prev); done {
			return ended
		}
	}
}

// refused is how a request ends that admission did not let make its
// first attempt: a refusal gives up with no attempt made; a wait that the
// caller's context ended ends it, with no refusal.
func refused(reason GiveUpReason, err error) event {
	if reason == "" {
		return event{kind: evEnd, err: err}
	}
	return event{kind: evGiveUp, reason: reason, r: result{err: refusal(reason, err)}}
}

// retry takes attempt n's failure worth retrying (r) through the ladder,
// admission and the wait: it returns the next attempt's body and the
// Backoff's own last value (not Retry-After's), or how the request ends.
func (k *call) retry(n int, r *result, prev time.Duration) (io.ReadCloser, time.Duration, event, bool) {
	f := k.facts(n, r, prev)
	v := decide(f)
	var next io.ReadCloser
	var adm admission.Next
	if v.giveUp == "" {
		next, adm, v = k.acquire(v, r)
	}
	if v.giveUp != "" {
		return nil, 0, event{kind: evGiveUp, attempt: n, r: *r, reason: v.giveUp, delay: v.delay}, true
	}
	decided := time.Now()
	shown := *r // what the hook is told of the attempt, once its wait ends
	if reason, err := k.wait(adm, v.delay, f.serverWait(), r); reason != "" || err != nil {
		// The wait gave up (reason), with the last response, or the
		// context ended it (err): the hook is told of attempt n as it was
		// before the wait (shown), or with the give-up.
		closeBody(next)
		if k.t.Known() { // what admission gave it back: its charge, its probe
			k.c.gate.Refund(&k.t)
			k.c.gate.Abandon(&k.t)
		}
		if err != nil {
			if r.resp != nil {
				r.resp.Body.Close() // kept for a give-up that did not come
			}
			return nil, 0, event{kind: evEnd, attempt: n, r: shown, err: err, end: decided}, true
		}
		return nil, 0, event{kind: evGiveUp, attempt: n, r: *r, reason: reason, end: decided}, true
	}
	if r.resp != nil {
		r.resp.Body.Close() // the kept response, not needed now
	}
	k.lastDelay = v.delay
	if adm == admission.NextHold || k.t.WasHeld {
		k.lastDelay = time.Since(decided) // a hold's wait is what it took
	}
	k.report(&event{kind: evRetry, attempt: n, r: shown, delay: k.lastDelay, end: decided})
	return next, f.backoff, event{}, false
}

// facts gathers what decide needs about attempt n's result.
func (k *call) facts(n int, r *result, prev time.Duration) facts {
	c := k.c
	f := facts{
		attempt: n, maxAttempts: k.maxAttempts(),
		replayable: k.replayable || r.declined, notSent: r.notSent,
		bodyOnce: k.body.mode == bodyOnce && c.maxAttempts > 1, // with one attempt, the reason is attempts
		maxRA:    c.maxRetryAfter,
	}
	if f.replayable || f.notSent {
		f.backoff = c.backoff.Delay(n, prev)
	}
	now := time.Now()
	if n == 1 {
		k.t.FirstFail = now
	}
	if r.resp != nil {
		f.retryAfter, f.hasRA = ratelimit.Wait(r.resp.Header, now)
		f.raSpread = spread(f.retryAfter)
	}
	if dl := k.t.CtxEnd; !dl.IsZero() {
		f.untilDL, f.hasDL = dl.Sub(now), true
	}
	if me := k.t.MaxElapsedEnd; !me.IsZero() {
		f.untilME, f.hasME = me.Sub(now), true
	}
	return f
}

// maxAttempts is the request's attempts in all: WithMaxAttempts, or, when
// a layer above owns its schedule, two (one retry, to save a transient
// failure inside the layer's try), one while the host is failing.
func (k *call) maxAttempts() int {
	switch {
	case !k.t.Owned:
		return k.c.maxAttempts
	case k.t.Failing():
		return 1
	}
	return min(k.c.maxAttempts, 2)
}

// acquire takes the two rungs of the ladder that act: it fetches the next
// attempt's body, then asks admission (internal/admission), which may charge the
// budget. A retry that admission refuses gives up now, without a wait.
func (k *call) acquire(v verdict, r *result) (io.ReadCloser, admission.Next, verdict) {
	next, err := k.body.next(k.ctx, k.req, k.bodyEnd(v.delay))
	if err != nil {
		return nil, admission.NextWait, verdict{k.bodyFailed(err), 0}
	}
	if !k.t.Known() {
		return next, admission.NextWait, v
	}
	adm, why := k.c.gate.AdmitRetry(&k.t, r.notSent)
	reason := GiveUpReason(why)
	if reason != "" {
		closeBody(next)
		if reason == GiveUpCircuitOpen {
			r.err = noResponse(r, ErrCircuitOpen)
		}
		return nil, admission.NextWait, verdict{reason, v.delay}
	}
	return next, adm, v
}

// wait waits before the next attempt: for its delay, then past the
// breaker; or held by the breaker from the start. A held retry never goes
// before the server's Retry-After (ra), and its backoff counts no further
// than the end of its schedule (its hold limit). It keeps r's response
// only if the retry may be held or refused by a pacer, and give up after
// its wait. Then the pacers are asked: one that refuses gives up with the
// last response, or errRefused; so does a retry whose deadline comes while
// it waits for them (a slot of the limit, a turn), like any other.
func (k *call) wait(adm admission.Next, delay, ra time.Duration, r *result) (GiveUpReason, error) {
	g := k.c.gate
	switch {
	case r.resp == nil:
	case g != nil && (g.HasBreaker() || g.Paced()):
		detach(r.resp, k.c.held)
	default:
		discard(r.resp)
		r.resp = nil
	}
	reason, err := k.waitOrHold(adm, delay, ra)
	switch {
	case reason == GiveUpBreaker:
		r.err = noResponse(r, ErrBreakerHold)
	case reason == GiveUpCircuitOpen:
		r.err = noResponse(r, ErrCircuitOpen)
	case reason != "" || err != nil || g == nil || !g.Paced():
	default:
		reason, err = reasonOf(g.Pace(&k.t))
		switch {
		case errors.Is(err, context.DeadlineExceeded) && r.resp != nil:
			return GiveUpDeadline, nil
		case err != nil:
			return "", err
		case reason != "":
			r.err = noResponse(r, errRefused)
		}
	}
	return reason, err
}

// waitOrHold waits for delay, or holds the retry (adm), or holds it after
// its wait if the breaker opened meanwhile (ra is the server's wait).
func (k *call) waitOrHold(adm admission.Next, delay, ra time.Duration) (GiveUpReason, error) {
	g := k.c.gate
	now := time.Now()
	if adm == admission.NextHold {
		nb, limit := k.holdTimes(now, delay, ra)
		return reasonOf(g.Hold(&k.t, nb, limit))
	}
	if err := sleep(k.ctx, delay); err != nil || !k.t.Known() {
		return "", err
	}
	why, held := g.AfterWait(&k.t)
	reason := GiveUpReason(why)
	if !held { // the breaker did not open meanwhile
		return reason, nil
	}
	nb, limit := k.holdTimes(time.Now(), 0, max(ra-time.Since(now), 0))
	return reasonOf(g.Hold(&k.t, nb, limit))
}

// holdTimes are the earliest and the latest times a retry of this request
// that waits delay, ra of it the server's, may go if held: the limit is
// its backoff schedule from the first failure (a random 80% to 100% of it
// while 4 or more are held)
// (or MaxHold from now), but
// no sooner than the server's wait ends, and no later than WithMaxElapsed
// or the context deadline; it goes no sooner than its wait, cut to the
// limit.
func (k *call) holdTimes(now time.Time, delay, ra time.Duration) (notBefore, limit time.Time) {
	if k.span == 0 {
		// A crowd that failed together (a process's callers held in one
		// instant) is held a random 80% to 100% of the schedule, drawn
		// once per request, so that its callers do not all come back,
		// and fail again, together; any other retry, the whole schedule.
		k.span = k.c.schedule
		if k.t.Crowd() {
			k.span = uniform(k.c.schedule-k.c.schedule/5, k.c.schedule)
		}
	}
	limit = k.t.FirstFail.Add(k.span)
	if mh := k.c.gate.MaxHold(); mh > 0 {
		limit = now.Add(mh)
	}
	if server := now.Add(ra); limit.Before(server) {
		limit = server
	}
	notBefore = now.Add(delay)
	if limit.Before(notBefore) {
		notBefore = limit
	}
	if end := k.t.End(); !end.IsZero() && end.Before(limit) {
		limit = end
	}
	return notBefore, limit
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
