// Package retryhttp provides an http.RoundTripper that retries failed
// requests safely: only requests that may be repeated, only outcomes worth
// repeating, after jittered exponential waits that Retry-After can stretch
// and the context deadline cuts short, within a per-host retry budget.
//
// This file holds the Transport and its retry loop. The decisions it makes
// are spread by subject: policy.go (options and defaults), backoff.go,
// budget.go, status.go (which outcomes), idempotency.go (which requests),
// retryafter.go, body.go (replaying and discarding bodies) and metrics.go.
package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"
)

// Transport is an http.RoundTripper that retries failed requests on its
// base RoundTripper. Which requests and outcomes are retried, and how it
// waits, is set by the Options given to New and documented on each one.
//
// A Transport is safe for concurrent use by multiple goroutines. The zero
// Transport behaves as New(nil): it retries with the defaults over a
// pooled transport shared by every zero Transport, the way the zero
// http.Client uses http.DefaultTransport.
type Transport struct {
	c *config
}

// New returns a Transport that sends each attempt through base, or through
// cleanhttp.DefaultPooledTransport() if base is nil. It panics, naming the
// option, if an option is invalid, as regexp.MustCompile does for a bad
// pattern: a misconfigured retry policy is a programming error.
//
// If base is itself a Transport (an SDK's client that already retries,
// wrapped again), the new Transport is the only one that retries: base
// passes each attempt through once. The same holds for a Transport deeper
// in a chain of other RoundTrippers; see RoundTrip. To find one there, a
// request sent to a base that is neither an *http.Transport nor a
// middleware that unwraps to one (with an Unwrap() http.RoundTripper
// method) carries a mark in its context, which costs its first attempt
// two allocations (a context and a shallow copy of the request). Give a
// middleware of your own an Unwrap method to spare them.
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

// ownerKey marks a request context whose retries are owned by an outer
// Transport, so that an inner one passes the attempt through once.
type ownerKey struct{}

// unwrapper is implemented by RoundTripper middleware that exposes the
// RoundTripper it wraps.
type unwrapper interface{ Unwrap() http.RoundTripper }

// findInner looks at base once, in New, to learn how to keep a single
// retry owner. A Transport as base is called directly, with no retries of
// its own. Below a plain *http.Transport there can be no other Transport,
// so nothing needs marking: the common case costs nothing per request. Any
// other base may hide a Transport, so requests are marked by context.
func findInner(base http.RoundTripper) (inner *Transport, mark bool) {
	rt := base
	for range 32 {
		switch b := rt.(type) {
		case *Transport:
			if rt == base {
				return b, false
			}
			return nil, true
		case *http.Transport:
			return nil, false
		case unwrapper:
			rt = b.Unwrap()
		default:
			return nil, true
		}
	}
	return nil, true
}

// send passes one attempt to the base, bypassing the retries of a
// Transport that base is.
func (c *config) send(req *http.Request) (*http.Response, error) {
	if c.inner != nil {
		return c.inner.config().send(req)
	}
	return c.base.RoundTrip(req)
}

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
// otherwise an *Error that says how many attempts were made and wraps the
// last error. A request that reaches a Transport through another
// Transport's attempt (an SDK's client wrapped again) is passed through
// once: only the outermost Transport retries.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.config()
	if req.URL == nil || req.Header == nil ||
		(req.URL.Scheme != "http" && req.URL.Scheme != "https") ||
		req.Context().Value(ownerKey{}) != nil {
		// Malformed, not HTTP, or an outer Transport owns the retries:
		// one attempt, and the base's own answer.
		return c.send(req)
	}
	return c.roundTrip(req)
}

// call is the state of one logical request: it lives in RoundTrip's frame.
type call struct {
	c          *config
	req        *http.Request
	ctx        context.Context
	header     http.Header // req.Header with an injected key, or nil
	mode       bodyMode
	buf        []byte
	keyed      bool
	replayable bool
	gotConn    *atomic.Bool // set by the trace of a request that is not replayable
}

func (c *config) roundTrip(req *http.Request) (*http.Response, error) {
	k := call{c: c, req: req, ctx: req.Context()}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	c.metrics.request(method)
	if c.budget != nil {
		c.budget.recordFirst(req.URL.Host, c.clock.Second())
	}

	k.keyed = hasIdempotencyKey(req.Header)
	if !k.keyed && c.keyMethods.has(method) {
		k.header = req.Header.Clone()
		k.header.Set(HeaderIdempotencyKey, c.keyGen())
		k.keyed = true
	}
	k.replayable = k.keyed || idempotentMethod(method)
	if !k.replayable {
		k.gotConn = new(atomic.Bool)
	}

	first := req.Body // the body of attempt 1
	if req.Body != nil && req.Body != http.NoBody {
		switch {
		case req.GetBody != nil:
			k.mode = bodyGetBody
		case c.maxAttempts == 1:
			k.mode = bodyOnce
		default:
			buf, all, err := bufferBody(req.Body, req.ContentLength, c.bodyLimit)
			if err != nil {
				return nil, &Error{Err: fmt.Errorf("reading request body: %w", err)}
			}
			k.buf, k.mode = buf, bodyBuffered
			switch {
			case !all:
				// Too long to buffer: send what was read and the rest of
				// the caller's body, once.
				k.mode, first = bodyOnce, onceBody{io.MultiReader(bytes.NewReader(buf), req.Body), req.Body}
			case req.ContentLength > 0 && int64(len(buf)) != req.ContentLength:
				// Not the length it declares: the base will reject it, once.
				k.mode, first = bodyOnce, newReplayBody(buf)
			default:
				first = newReplayBody(buf)
			}
		}
	}

	var (
		prev time.Duration
		body = first
		mode = sendNow // how this attempt passed the breaker
		br   = c.breaker
		host = req.URL.Host
	)
	for attempt := 1; ; attempt++ {
		resp, err, timedOut := k.attempt(attempt, body)
		if c.metrics != nil {
			c.metrics.attempt(outcome(resp, err, timedOut))
		}
		var notSent, failed bool
		if err == nil {
			failed = k.retryableStatus(resp.StatusCode)
		} else {
			failed = k.ctx.Err() == nil && classifyError(err) == errRetryable
		}
		if br != nil {
			if err == nil && !failed {
				// A success needs no time: it only lowers the score.
				br.record(host, attempt == 1, false, time.Time{})
			} else {
				now := c.clock.Now()
				if mode == sendProbe {
					br.probeFailed(host, now)
				}
				if failed {
					br.record(host, attempt == 1, true, now)
				}
			}
		}
		if err == nil {
			if !failed {
				return resp, nil
			}
			if !k.replayable {
				return k.giveUp(GiveUpUnsafeMethod, attempt, resp, nil, 0)
			}
		} else {
			if !failed {
				return nil, &Error{Attempts: attempt, Err: err}
			}
			// Nothing was written if no connection was had: the trace (for
			// a request where it matters) saw none, and the error says so.
			notSent = isDialError(err) && (k.gotConn == nil || !k.gotConn.Load())
			if !k.replayable && !notSent {
				return k.giveUp(GiveUpUnsafeMethod, attempt, nil, err, 0)
			}
		}

		// The outcome is worth retrying and the request may be repeated:
		// now see whether the policy lets it be.
		if k.mode == bodyOnce {
			return k.giveUp(GiveUpBody, attempt, resp, err, 0)
		}
		if attempt >= c.maxAttempts {
			return k.giveUp(GiveUpAttempts, attempt, resp, err, 0)
		}
		delay := max(c.backoff.Delay(attempt, prev), 0)
		now := c.clock.Now()
		if resp != nil {
			if ra, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
				if ra > c.maxRetryAfter {
					return k.giveUp(GiveUpRetryAfter, attempt, resp, nil, ra)
				}
				delay = max(delay, ra)
			}
		}
		if dl, ok := k.ctx.Deadline(); ok && !now.Add(delay).Before(dl) {
			return k.giveUp(GiveUpDeadline, attempt, resp, err, delay)
		}
		// A request that never left the client cost the server nothing, so
		// its retry does not spend the budget; nor does one that the open
		// breaker will hold.
		if c.budget != nil && !notSent && !(br != nil && br.isOpen(host)) &&
			!c.budget.allowRetry(host, c.clock.Second()) {
			return k.giveUp(GiveUpBudget, attempt, resp, err, delay)
		}
		next, gerr := k.nextBody()
		if gerr != nil {
			return k.giveUp(GiveUpBody, attempt, resp, err, 0)
		}

		k.scheduled(attempt, delay, outcome(resp, err, timedOut), resp, err)
		if resp != nil {
			if br == nil || !detach(resp) {
				// Without a breaker no later give-up needs the response.
				discard(resp)
				resp = nil
			}
		}
		if serr := c.clock.Sleep(k.ctx, delay); serr != nil {
			closeBody(next)
			return nil, &Error{Attempts: attempt, Err: serr}
		}
		if br != nil {
			var herr error
			mode, herr = k.passBreaker(br, host, attempt+1 == c.maxAttempts)
			switch {
			case herr == ErrBreakerHold:
				closeBody(next)
				if resp == nil && err == nil {
					err = ErrBreakerHold
				}
				return k.giveUp(GiveUpBreaker, attempt, resp, err, 0)
			case herr != nil:
				closeBody(next)
				return nil, &Error{Attempts: attempt, Err: herr}
			}
		}
		prev, body = delay, next
	}
}

// passBreaker holds a retry while the breaker is open, and spreads a
// released one with jitter, within the request's deadline.
func (k *call) passBreaker(br *breaker, host string, last bool) (holdMode, error) {
	c := k.c
	limit := c.clock.Now().Add(br.cfg.MaxHold)
	dl, hasDeadline := k.ctx.Deadline()
	if hasDeadline && dl.Before(limit) {
		limit = dl
	}
	mode, err := br.hold(k.ctx, host, c.clock, limit, last)
	if err != nil || mode != sendReleased {
		return mode, err
	}
	spread := uniform(0, br.cfg.ReleaseSpread)
	if hasDeadline && !c.clock.Now().Add(spread).Before(dl) {
		return mode, nil // no time to spread: send now
	}
	return mode, c.clock.Sleep(k.ctx, spread)
}

func closeBody(b io.ReadCloser) {
	if b != nil {
		b.Close()
	}
}

// nextBody returns the body of the next attempt.
func (k *call) nextBody() (io.ReadCloser, error) {
	switch k.mode {
	case bodyGetBody:
		return k.req.GetBody()
	case bodyBuffered:
		return newReplayBody(k.buf), nil
	}
	return k.req.Body, nil
}

// retryableStatus reports whether code is worth retrying for this request.
func (k *call) retryableStatus(code int) bool {
	if k.c.statuses.has(code) {
		return true
	}
	return code == statusConflict && k.keyed && !k.c.customStatuses
}

// attempt sends one attempt with the given body. It copies the request only
// when something differs from the caller's: on the success path of a GET
// with the default options it sends req itself, allocating nothing.
func (k *call) attempt(n int, body io.ReadCloser) (resp *http.Response, err error, timedOut bool) {
	c, req := k.c, k.req
	ctx := k.ctx
	if k.gotConn != nil {
		gotConn := k.gotConn
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
		})
	}
	if c.markOwner {
		ctx = context.WithValue(ctx, ownerKey{}, true)
	}
	var cancel context.CancelCauseFunc
	if c.perAttemptTimeout > 0 {
		ctx, cancel = context.WithCancelCause(ctx)
	}
	r := req
	if ctx != k.ctx {
		r = req.WithContext(ctx)
	}
	header := k.header
	if n > 1 && c.attemptHeader != "" {
		// A fresh map for each attempt: the base may still be reading the
		// previous attempt's headers.
		if header == nil {
			header = req.Header
		}
		header = header.Clone()
		header.Set(c.attemptHeader, strconv.Itoa(n))
	}
	if body != req.Body || header != nil {
		if r == req {
			r = req.WithContext(ctx)
		}
		r.Body = body
		if header != nil {
			r.Header = header
		}
		if k.mode == bodyBuffered {
			buf := k.buf
			r.GetBody = func() (io.ReadCloser, error) { return newReplayBody(buf), nil }
		}
	}
	if cancel == nil {
		return k.sendChecked(r)
	}

	timer := time.AfterFunc(c.perAttemptTimeout, func() { cancel(errAttemptTimeout) })
	resp, err, _ = k.sendChecked(r)
	if !timer.Stop() && context.Cause(ctx) == errAttemptTimeout {
		if resp != nil {
			resp.Body.Close()
		}
		cancel(context.Canceled)
		return nil, &attemptTimeoutError{c.perAttemptTimeout, err}, true
	}
	if err != nil {
		cancel(context.Canceled)
		return nil, err, false
	}
	resp.Body = wrapCancel(resp.Body, cancel)
	return resp, nil, false
}

// sendChecked sends r, keeping the RoundTripper contract for a base that
// breaks it: a response that comes with an error is closed and dropped.
func (k *call) sendChecked(r *http.Request) (*http.Response, error, bool) {
	resp, err := k.c.send(r)
	if err != nil && resp != nil {
		if resp.Body != nil {
			resp.Body.Close()
		}
		resp = nil
	}
	if err == nil && resp == nil {
		err = errNilResponse
	}
	return resp, err, false
}

var errNilResponse = errors.New("retryhttp: base RoundTripper returned a nil response and a nil error")

// giveUp ends a request whose outcome was worth retrying but may not be
// retried, for the given reason.
func (k *call) giveUp(reason string, attempt int, resp *http.Response, err error, delay time.Duration) (*http.Response, error) {
	c := k.c
	c.metrics.giveUp(reason)
	if c.logger != nil {
		c.logger.LogAttrs(k.ctx, slog.LevelWarn, "retryhttp: giving up",
			k.logAttrs(attempt, delay, reason, outcome(resp, err, false).String())...)
	}
	if resp != nil {
		return resp, nil
	}
	return nil, &Error{Attempts: attempt, Reason: reason, Err: err}
}

// scheduled reports a retry that is about to wait.
func (k *call) scheduled(attempt int, delay time.Duration, reason outcomeID, resp *http.Response, err error) {
	c := k.c
	c.metrics.retry(reason, delay)
	if c.logger != nil {
		c.logger.LogAttrs(k.ctx, slog.LevelInfo, "retryhttp: retrying",
			k.logAttrs(attempt, delay, "", reason.String())...)
	}
	if c.onRetry != nil {
		ev := RetryEvent{Request: k.req, Attempt: attempt, MaxAttempts: c.maxAttempts,
			Delay: delay, Reason: reason.String(), Err: err}
		if resp != nil {
			ev.StatusCode = resp.StatusCode
		}
		c.onRetry(ev)
	}
}

// logAttrs are the attributes of a log record. They never include a header
// value or the query string.
func (k *call) logAttrs(attempt int, delay time.Duration, giveUp, reason string) []slog.Attr {
	method := k.req.Method
	if method == "" {
		method = http.MethodGet
	}
	attrs := []slog.Attr{
		slog.String("method", method),
		slog.String("host", k.req.URL.Host),
		slog.String("path", k.req.URL.Path),
		slog.Int("attempt", attempt),
		slog.Int("max_attempts", k.c.maxAttempts),
		slog.Duration("delay", delay),
		slog.String("reason", reason),
	}
	if giveUp != "" {
		attrs = append(attrs, slog.String("give_up", giveUp))
	}
	return attrs
}

// RetryEvent describes a retry about to be made, for WithOnRetry.
type RetryEvent struct {
	Request     *http.Request // the caller's request: read it, do not keep or modify it
	Attempt     int           // the attempt that failed, 1 for the first
	MaxAttempts int
	Delay       time.Duration // the wait before the next attempt
	Reason      string        // the status code ("503") or the error class ("reset", "timeout", ...)
	StatusCode  int           // the failed attempt's status, 0 if it ended in an error
	Err         error         // the failed attempt's error, nil if it had a response
}

// Why a retryable failure was not retried: the reason of an Error, of the
// give-up log record and of the retryhttp_giveups_total metric.
const (
	GiveUpAttempts     = "attempts"      // WithMaxAttempts reached
	GiveUpDeadline     = "deadline"      // the wait would end past the context deadline
	GiveUpBudget       = "budget"        // the host's retry budget is spent
	GiveUpRetryAfter   = "retry_after"   // Retry-After asks for more than WithMaxRetryAfter
	GiveUpBody         = "body"          // the body is too long to replay, or GetBody failed
	GiveUpUnsafeMethod = "unsafe_method" // a non-idempotent request without a key reached the server
)

// Error is returned by RoundTrip when a request ends without a response.
// It says how many attempts were made and unwraps to the last attempt's
// error, so errors.Is and errors.As reach the cause.
type Error struct {
	Attempts int    // attempts sent; 0 if the request body could not be read
	Reason   string // why a retryable error was not retried (GiveUp...), or "" if it was not retryable
	Err      error
}

func (e *Error) Error() string {
	s := "s"
	if e.Attempts == 1 {
		s = ""
	}
	if e.Reason != "" {
		return fmt.Sprintf("retryhttp: gave up after %d attempt%s (%s): %v", e.Attempts, s, e.Reason, e.Err)
	}
	return fmt.Sprintf("retryhttp: %d attempt%s: %v", e.Attempts, s, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrAttemptTimeout is what an attempt that outlived WithPerAttemptTimeout
// ends with; errors.Is finds it in the error RoundTrip returns.
var ErrAttemptTimeout = errors.New("retryhttp: attempt timed out")

var errAttemptTimeout = ErrAttemptTimeout

type attemptTimeoutError struct {
	after time.Duration
	err   error // what the base returned when its context was cut
}

func (e *attemptTimeoutError) Error() string {
	return fmt.Sprintf("retryhttp: attempt timed out after %v", e.after)
}
func (e *attemptTimeoutError) Is(target error) bool { return target == ErrAttemptTimeout }
func (e *attemptTimeoutError) Timeout() bool        { return true }
func (e *attemptTimeoutError) Temporary() bool      { return true }
