// This file holds the Transport and its retry loop. The loop reads as:
// admit the request (First), send an attempt, record it once (Done), stop
// unless it failed in a way worth retrying, decide (decide.go), wait as
// admission says (Retry), next attempt. What each step needs is
// elsewhere: attempt.go (the call and its attempts), decide.go (the
// give-up ladder), internal/admission (the per-host controllers: budget,
// breaker and pacers, over the host's health; their options in
// overload.go),
// report.go (metrics, logs and the attempt hook), errors.go
// (reasons and errors), options.go and config.go (options).

package retryhttp

import (
	"io"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/admission"
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
	ctx := req.Context()
	if req.URL == nil || req.Header == nil ||
		(req.URL.Scheme != "http" && req.URL.Scheme != "https") || ctx.Value(ownerKey{}) != nil {
		// Malformed, not HTTP, or an outer Transport owns the retries
		// (layered.go): one attempt, and the base's own answer.
		return c.send(req)
	}
	if ro, _ := ctx.Value(requestOptionsKey{}).(*requestOptions); ro != nil || len(c.operations) > 0 {
		var err error
		if c, err = c.forRequest(req, ro); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, &Error{Err: err}
		}
	}
	return c.roundTrip(req)
}

// roundTrip runs req's attempts, reports how the request ended, and
// returns what RoundTrip returns: the last response if there is one, with
// a nil error, else an [*Error] that says how many attempts were made and
// why it stopped.
func (c *config) roundTrip(req *http.Request) (*http.Response, error) {
	var k call
	body := c.newCall(&k, req)
	if k.body.tee != nil {
		defer k.body.tee.Release()
	}
	var e event
	k.run(body, &e)
	if e.kind != evEnd || k.hookEnd != nil {
		k.report(&e) // an end with no hook to tell has nothing to report
	}
	switch {
	case e.err != nil:
		return nil, &Error{Attempts: e.attempt, Err: e.err, Fallback: c.fallback}
	case e.kind == evGiveUp && (c.fallback != nil || c.fallbackFn != nil):
		return k.fallBack(&e, e.r.resp, k.failure(&e))
	case e.r.resp != nil:
		return e.r.resp, nil
	}
	return nil, k.failure(&e)
}

// failure is the *Error of a request that ended without a response, as e
// says; nil if it ended with one.
func (k *call) failure(e *event) error {
	if e.r.resp != nil {
		return nil
	}
	return &Error{Attempts: e.attempt, Reason: e.reason, Err: e.r.err, Fallback: k.c.fallback,
		above: e.reason == GiveUpAttempts && k.owned}
}

// run sends the request's attempts until one of them, or admission, ends
// it, and says how in e: the event that is reported once.
func (k *call) run(body io.ReadCloser, e *event) {
	var hedge float64
	if k.c.hedge != nil {
		hedge = k.c.hedge.Percentile
	}
	after, reason, err := k.t.First(k.c.gate, &admission.Request{Ctx: k.ctx, Scheme: k.req.URL.Scheme, Host: k.req.URL.Host,
		CtxEnd: k.ctxEnd, MaxElapsedEnd: k.elapsedEnd, Owned: k.owned, Repeat: k.repeat, Hedge: hedge, Level: k.c.level})
	if reason != "" || err != nil {
		closeBody(body)
		*e = refused(GiveUpReason(reason), err)
		return
	}
	k.hedgeAfter = after
	var prev time.Duration
	for e.attempt = 1; ; e.attempt++ {
		k.attempt(e.attempt, body, &e.r)
		if !e.r.retryable {
			return // an end (evEnd) with the attempt's result
		}
		var done bool
		if body, prev, done = k.retry(e, prev); done {
			return
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

// retry takes the failure worth retrying of attempt e.attempt (e.r)
// through the ladder and admission, which owns the wait: it returns the
// next attempt's body and the Backoff's own last value (not
// Retry-After's), or says how the request ends in e (done).
func (k *call) retry(e *event, prev time.Duration) (next io.ReadCloser, backoff time.Duration, done bool) {
	n, r := e.attempt, &e.r
	f := k.facts(n, r, prev)
	v := decide(f)
	next = k.req.Body // without a body, every attempt sends the request as is
	if v.giveUp == "" && k.body.mode != bodyNone {
		var err error
		if next, err = k.nextBody(v.delay); err != nil {
			v = verdict{k.bodyFailed(err), 0}
		}
	}
	if v.giveUp != "" {
		*e = event{kind: evGiveUp, attempt: n, r: *r, reason: v.giveUp, delay: v.delay}
		return nil, 0, true
	}
	decided := time.Now()
	shown := *r // what the hook is told of the attempt, once its wait ends
	waited := false
	a := k.t.Retry(admission.Wait{Delay: v.delay, Server: f.server, Free: r.notSent, Keep: func() {
		waited = true
		k.keep(r)
	}})
	if a.Reason != "" || a.Err != nil {
		// Refused at once (not waited), with the last response; or the
		// wait gave up, with what it kept of it; or the context ended it
		// (the hook is told of attempt n as it was before the wait).
		closeBody(next)
		reason := GiveUpReason(a.Reason)
		if a.Err != nil && (reason == "" || r.resp == nil) {
			if r.resp != nil {
				r.resp.Body.Close() // kept for a give-up that did not come
			}
			*e = event{kind: evEnd, attempt: n, r: shown, err: a.Err, end: decided}
			return nil, 0, true
		}
		r.err = gaveUpWith(r, reason)
		*e = event{kind: evGiveUp, attempt: n, r: *r, reason: reason, end: decided}
		if !waited {
			e.delay, e.end = v.delay, time.Time{}
		}
		return nil, 0, true
	}
	if r.resp != nil {
		r.resp.Body.Close() // the kept response, not needed now
	}
	k.lastDelay = v.delay
	if a.Held {
		k.lastDelay = time.Since(decided) // a hold's wait is what it took
	}
	if k.c.reporting {
		k.report(&event{kind: evRetry, attempt: n, r: shown, delay: k.lastDelay, end: decided})
	}
	return next, f.backoff, false
}

// keep keeps the last response of a retry that is about to wait, if the
// breaker or a pacer may make it give up after its wait (in memory, up
// to its share of the kept bodies' bound); otherwise it is drained now,
// and the connection reused during the wait.
func (k *call) keep(r *result) {
	switch {
	case r.resp == nil:
	case k.c.keepLast:
		detach(r.resp, k.c.held)
	default:
		discard(r.resp)
		r.resp = nil
	}
}
