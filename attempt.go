// This file holds one logical request's state (call) and its attempts:
// how the request is prepared once (key, body), how each attempt is built
// and sent under its per-attempt timeout, and how its result is
// classified and recorded once.

package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"
)

// call is the state of one logical request: it lives in RoundTrip's frame.
type call struct {
	c          *config
	req        *http.Request
	ctx        context.Context
	host       string
	header     http.Header // req.Header with an injected key, or nil
	mode       bodyMode
	buf        chunks
	tee        *teeBody // the first attempt's body, while it is being kept
	keyed      bool
	replayable bool
	gotConn    *atomic.Bool     // set by the trace of a request that is not replayable
	traceAlone bool             // gotConn alone tells whether anything was sent (an *http.Transport)
	budget     *hostBudget      // the host's budget, nil without one
	breaker    *breakerHost     // the host's breaker, nil without one
	pass       holdMode         // how the next attempt passes the breaker
	charged    bool             // the next attempt's retry was charged to the budget
	firstFail  time.Time        // when the first attempt failed, if it did
	hookEnd    func(AttemptEnd) // the attempt hook's end of the attempt in flight
	lastDelay  time.Duration    // the wait before the attempt in flight
	start      time.Time        // when the first attempt began, with WithMaxElapsed only
}

// result is what one attempt ended with, classified once.
type result struct {
	resp      *http.Response
	err       error
	outcome   outcomeID
	retryable bool // worth retrying (the request may still not be)
	notSent   bool // provably not processed: no connection was had, or HTTP/2 said so
}

// newCall prepares req for its attempts: it injects the idempotency key,
// decides how the body is replayed, and counts the first attempt in the
// budget. It returns the first attempt's body.
func (c *config) newCall(k *call, req *http.Request) (io.ReadCloser, error) {
	*k = call{c: c, req: req, ctx: req.Context(), host: req.URL.Host}
	if c.maxElapsed > 0 {
		k.start = c.clock.Now()
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	c.metrics.request(method)
	if c.budget != nil || c.breaker != nil {
		var buf [maxHostKey]byte
		key, kb := canonicalHost(req.URL.Scheme, k.host, &buf)
		sec := c.clock.Second()
		if c.budget != nil {
			k.budget = c.budget.recordFirst(key, kb, sec)
		}
		if c.breaker != nil {
			k.breaker = c.breaker.hosts.getKey(key, kb, sec)
		}
	}

	k.keyed = hasIdempotencyKey(req.Header, !idempotentMethod(method))
	if !k.keyed && c.keyMethods.has(method) {
		k.header = req.Header.Clone()
		k.header.Set(HeaderIdempotencyKey, c.keyGen())
		k.keyed = true
	}
	k.detectLayered()
	k.replayable = k.keyed || idempotentMethod(method)
	if !k.replayable && (!c.plainBase || req.URL.Scheme == "https") {
		// Whether an error means that nothing was sent. Over a plain
		// *http.Transport and http, a dial error says so (it sends a
		// request that is not replayable on one connection only, and
		// resends others only when nothing was written), at no cost.
		// Over https a reset during the TLS handshake is an error like
		// any other read error: only the trace tells that no connection
		// was had. Over another base, the trace and a dial error must
		// agree.
		k.gotConn = new(atomic.Bool)
		k.traceAlone = c.plainBase
	}

	first := req.Body
	if req.Body == nil || req.Body == http.NoBody {
		return first, nil
	}
	switch {
	case req.GetBody != nil:
		k.mode = bodyGetBody
	case c.maxAttempts == 1 || req.ContentLength > c.bodyLimit:
		// Never retried, or too long to keep: sent once, as it is.
		k.mode = bodyOnce
	default:
		// Kept while the first attempt sends it (tee.go).
		k.tee = newTeeBody(req.Body, req.ContentLength, c.bodyLimit)
		k.mode, first = bodyTee, k.tee
	}
	return first, nil
}

// sized passes on a body, failing one that is not the length cl > 0 that
// the request declares: no attempt can send it.
func sized(cs chunks, err error, cl int64) (chunks, error) {
	if err == nil && cl > 0 && cs.size() != cl {
		return nil, errLengthMismatch
	}
	return cs, err
}

// nextBody returns the body of the next attempt.
func (k *call) nextBody() (io.ReadCloser, error) {
	switch k.mode {
	case bodyGetBody:
		return k.req.GetBody()
	case bodyBuffered:
		return newReplayBody(k.buf), nil
	case bodyTee:
		cs, err := k.tee.rest(k.ctx)
		cs, err = sized(cs, err, k.req.ContentLength)
		if err != nil {
			return nil, err
		}
		k.buf, k.mode = cs, bodyBuffered
		return newReplayBody(cs), nil
	}
	return k.req.Body, nil
}

func closeBody(b io.ReadCloser) {
	if b != nil {
		b.Close()
	}
}

// attempt sends attempt n with the given body and classifies what it ended
// with. It copies the request only when something differs from the
// caller's: on the success path of a GET with the default options it sends
// req itself, allocating nothing.
func (k *call) attempt(n int, body io.ReadCloser) (r result) {
	if k.pass == sendProbe {
		// A panic in the base must not leave the host's breaker waiting
		// for a probe that never ends.
		defer func() {
			if p := recover(); p != nil {
				k.breaker.probeEnded(k.c.clock.Now())
				panic(p)
			}
		}()
	}
	if k.c.hedge != nil && n == 1 {
		return k.hedged(body)
	}
	resp, timedOut, end, err := k.send(k.ctx, n, body, false)
	k.hookEnd = end
	return k.classify(resp, err, timedOut)
}

// classify sorts what an attempt ended with.
func (k *call) classify(resp *http.Response, err error, timedOut bool) (r result) {
	r = result{resp: resp, err: err, outcome: outcome(resp, err, timedOut)}
	if err == nil {
		r.retryable = k.retryableStatus(resp.StatusCode)
	} else {
		r.retryable = k.ctx.Err() == nil && classifyError(k.header0(), err) == errRetryable &&
			!k.lengthMismatch()
		// Nothing was processed if no connection was had (the trace, for
		// a request where it matters, saw none, and the error says so) or
		// if HTTP/2 says so.
		r.notSent = r.retryable && k.neverSent(err)
	}
	if k.c.retryIf != nil {
		k.applyRetryIf(&r)
	}
	return r
}

// retryableStatus reports whether code is worth retrying for this request.
func (k *call) retryableStatus(code int) bool {
	if k.c.statuses.has(code) {
		return true
	}
	return code == statusConflict && k.keyed && !k.c.customStatuses
}

// record takes the result of attempt n into the metrics, the budget and
// the breaker, once.
func (k *call) record(r *result) {
	c := k.c
	c.metrics.attempt(r.outcome)
	answered := r.err == nil && !r.retryable // the host did its job
	if k.budget != nil {
		if answered {
			k.budget.succeeded()
		} else if r.retryable {
			k.budget.failed()
		}
	}
	if k.breaker != nil {
		probe := k.pass == sendProbe
		switch {
		case answered:
			k.breaker.succeeded(c.clock)
		case r.retryable:
			k.breaker.failed(c.clock.Now(), probe)
		case probe:
			k.breaker.probeEnded(c.clock.Now())
		}
	}
}

// send builds attempt n's request and sends it under base, the request's
// context or a copy's of a hedged attempt, and under the per-attempt
// timeout, if one is set. It returns the attempt hook's end, if any.
func (k *call) send(base context.Context, n int, body io.ReadCloser, hedge bool) (resp *http.Response, timedOut bool, end func(AttemptEnd), err error) {
	c, req := k.c, k.req
	ctx := base
	if k.gotConn != nil {
		gotConn := k.gotConn
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
		})
	}
	if c.markOwner {
		ctx = markOwned(ctx)
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
	if (n > 1 && c.attemptHeader != "") || c.attemptHook != nil {
		// A fresh map for each attempt: the base may still be reading the
		// previous attempt's headers.
		if header == nil {
			header = req.Header
		}
		header = header.Clone()
		if n > 1 && c.attemptHeader != "" {
			header.Set(c.attemptHeader, strconv.Itoa(n))
		}
	}
	if c.attemptHook != nil {
		var hctx context.Context
		hctx, end = c.attemptHook(ctx, AttemptStart{Request: req, Header: header,
			Attempt: n, MaxAttempts: c.maxAttempts, Delay: k.lastDelay, Hedge: hedge})
		if hctx != nil && hctx != ctx {
			ctx = hctx
			r = req.WithContext(ctx)
		}
	}
	if body != req.Body || header != nil {
		if r == req {
			r = req.WithContext(ctx)
		}
		r.Body = body
		if header != nil {
			r.Header = header
		}
		switch {
		case k.mode == bodyBuffered:
			buf := k.buf
			r.GetBody = func() (io.ReadCloser, error) { return newReplayBody(buf), nil }
		case k.mode == bodyTee && !k.replayable:
			// net/http resends a request that is not replayable only when
			// the server cannot have processed it (nothing written on a
			// reused connection, an HTTP/2 stream refused or beyond a
			// GOAWAY), and only if it can rewind the body: let it, from
			// what the tee keeps. A replayable request is resent by the
			// loop instead, where the resend is counted.
			// (A closure over copies: a method value would move the call
			// to the heap on every path.)
			tee, ctx, cl := k.tee, k.ctx, req.ContentLength
			r.GetBody = func() (io.ReadCloser, error) {
				cs, err := tee.rewind(ctx)
				cs, err = sized(cs, err, cl)
				if err != nil {
					return nil, err
				}
				return newReplayBody(cs), nil
			}
		}
	}
	if cancel == nil {
		resp, err = k.sendChecked(r)
		return resp, false, end, err
	}

	timer := time.AfterFunc(c.perAttemptTimeout, func() { cancel(ErrAttemptTimeout) })
	resp, err = k.sendChecked(r)
	if !timer.Stop() && context.Cause(ctx) == ErrAttemptTimeout {
		if resp != nil {
			resp.Body.Close()
		}
		cancel(context.Canceled)
		return nil, true, end, &attemptTimeoutError{c.perAttemptTimeout, err}
	}
	if err != nil {
		cancel(context.Canceled)
		return nil, false, end, err
	}
	resp.Body = wrapCancel(resp.Body, cancel)
	return resp, false, end, nil
}

// sendChecked sends r, keeping the RoundTripper contract for a base that
// breaks it: a response that comes with an error is closed and dropped.
func (k *call) sendChecked(r *http.Request) (*http.Response, error) {
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
	if resp != nil && resp.Body == nil {
		// As http.Client does for a base that leaves it nil.
		resp.Body = http.NoBody
	}
	return resp, err
}

// header0 is the header the attempts are sent with.
func (k *call) header0() http.Header {
	if k.header != nil {
		return k.header
	}
	return k.req.Header
}

// neverSent reports whether an attempt that ended in err was provably not
// processed by the server: no connection was had, or HTTP/2 says so. A base
// that fails in the tee's GetBody (a body over the limit) was resending the
// request for one of these reasons; the retry then gives up for the body.
func (k *call) neverSent(err error) bool {
	if unprocessed(err) || errors.Is(err, errTooLong) {
		return true
	}
	switch {
	case k.gotConn == nil:
		return isDialError(err)
	case k.traceAlone:
		return !k.gotConn.Load()
	}
	return isDialError(err) && !k.gotConn.Load()
}

// lengthMismatch reports whether the body GetBody gives is not the length
// the request declares: net/http refuses to send such a request (with an
// untyped error), and would refuse every retry alike. It reads a body
// from GetBody, on the failure path only.
func (k *call) lengthMismatch() bool {
	cl := k.req.ContentLength
	if k.mode != bodyGetBody || cl <= 0 {
		return false
	}
	b, err := k.req.GetBody()
	if err != nil {
		return false
	}
	defer b.Close()
	n, _ := io.Copy(io.Discard, io.LimitReader(b, cl+1))
	return n != cl
}
