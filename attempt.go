// This file holds one logical request's state (call) and its attempts:
// how the request is prepared once (key, body), how each attempt is built
// and sent under its per-attempt timeout, and how its result, classified
// (status.go), is recorded once.

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

	"github.com/retryhttp/retryhttp/internal/admission"
	"github.com/retryhttp/retryhttp/internal/replay"
	"github.com/retryhttp/retryhttp/internal/rotation"
)

// call is the state of one logical request: it lives in RoundTrip's
// frame. What admission needs of it is in t (internal/admission).
type call struct {
	c          *config
	req        *http.Request
	ctx        context.Context
	header     http.Header // req.Header with an injected key, or nil
	body       bodyReplay
	keyed      bool
	replayable bool
	sent       sentTrace
	t          admission.Ticket // its admission: First, Done, Retry and Hedge
	ctxEnd     time.Time        // its context's deadline, zero if none
	elapsedEnd time.Time        // when WithMaxElapsed ends it, zero if never
	owned      bool             // a layer above owns its schedule (layered.go)
	repeat     bool             // it is itself a layer above's retry
	failing    bool             // its host was failing as its last attempt failed (Done)
	plain      bool             // an attempt with req's body sends req itself, or only marked (newCall)
	hedgeAfter time.Duration    // with hedging: the host's latency after which a copy may go (First)
	latency    time.Duration    // a hedged first attempt's winning copy's own latency, for Done
	lastDelay  time.Duration    // the wait before the attempt in flight
	hookEnd    func(AttemptEnd) // the attempt hook's end of the attempt in flight
	tried      *rotation.Tried  // the addresses its attempts went to, with WithAddressRotation
}

// sentTrace tells whether an attempt that failed was sent at all.
type sentTrace struct {
	gotConn *atomic.Bool // set by the trace of a request that is not replayable
	alone   bool         // gotConn alone tells (an *http.Transport)
}

// result is what one attempt ended with, classified once.
type result struct {
	resp      *http.Response
	err       error
	outcome   outcomeID
	retryable bool // worth retrying (the request may still not be)
	notSent   bool // provably not processed: no connection was had, or HTTP/2 said so
	declined  bool // its status is one the host answers only to what it did not process (WithUnprocessedStatuses)
}

// newCall prepares req for its attempts, in k, a zero call: it injects
// the idempotency key, decides how the body is replayed, whether a layer
// above retries it, and whether an attempt with req's body can send req
// itself (marked, over a base that may hide a Transport).
// It returns the first attempt's body.
func (c *config) newCall(k *call, req *http.Request) io.ReadCloser {
	k.c, k.req, k.ctx = c, req, req.Context()
	k.ctxEnd, _ = k.ctx.Deadline()
	if c.maxElapsed > 0 {
		k.elapsedEnd = time.Now().Add(c.maxElapsed)
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if c.metrics != nil {
		c.metrics.request(method, c.level)
	}
	k.key(method)
	if len(req.Header) > 0 || c.layers.noted.Load() {
		k.detectLayered(method)
	}
	if !k.replayable && (!c.plainBase || req.URL.Scheme == "https") {
		// Whether an error means that nothing was sent. Over a plain
		// *http.Transport and http, a dial error says so (it sends a
		// request that is not replayable on one connection only, and
		// resends others only when nothing was written), at no cost.
		// Over https a reset during the TLS handshake is an error like
		// any other read error: only the trace tells that no connection
		// was had. Over another base, the trace and a dial error must
		// agree.
		k.sent = sentTrace{gotConn: new(atomic.Bool), alone: c.plainBase}
	}
	body := req.Body
	if body != nil && body != http.NoBody {
		body = k.body.first(req, c.maxAttempts, c.bodyLimit)
	}
	k.plain = c.plainAttempts && c.perAttemptTimeout == 0 && k.header == nil && k.sent.gotConn == nil
	return body
}

// key decides whether the request may be repeated: by its method (RFC
// 9110 section 9.2.2 defines GET, HEAD, OPTIONS, TRACE, PUT and DELETE
// as idempotent), by a key it carries or is given (WithIdempotencyKeys),
// or by its declaration.
func (k *call) key(method string) {
	c, req := k.c, k.req
	// A request declared unsafe (NotIdempotent) is repeated only with a
	// key, whatever its method. One declared safe (Idempotent,
	// WithIdempotentIf) needs no key, and gets none: its declaration is
	// asked first.
	var idem bool
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		idem = !c.notIdempotent
	}
	k.keyed = len(req.Header) > 0 && hasIdempotencyKey(req.Header, !idem)
	declared := !k.keyed && !idem && !c.notIdempotent && c.declaredSafe != nil && c.declaredSafe(req)
	if !k.keyed && !declared && len(c.keyMethods) > 0 && c.keyMethods.has(method) {
		k.header, k.keyed = withKey(req.Header, c.keyGen()), true
	}
	k.replayable = k.keyed || declared || idem
}

// attempt sends attempt n with the given body, classifies what it ended
// with into r, and records it once: in the metrics and the host's admission
// state. It copies the request only when something differs from the
// caller's: on the success path of a GET with the default options it
// sends req itself, allocating nothing.
func (k *call) attempt(n int, body io.ReadCloser, r *result) {
	c := k.c
	if n > 1 || c.guardFirst {
		// A panic in the base must not leave the host waiting for a
		// probe that never ends, or a pacer's slot or quota that is
		// never given back.
		defer func() {
			if p := recover(); p != nil {
				k.t.Done(&admission.Outcome{Panicked: true})
				panic(p)
			}
		}()
	}
	switch {
	case n == 1 && c.hedge != nil:
		*r = k.hedged(body)
	case k.plain && body == k.req.Body:
		// Nothing to add to req (newCall): req itself, or, over a base
		// that may hide a Transport, a copy with the owner's mark.
		req := k.req
		if c.markOwner {
			req = markedCopy(req, k.ctx)
		}
		resp, err := c.sendChecked(req)
		k.classify(r, resp, err, false)
	default:
		a := k.prepare(k.ctx, false, n, body, false)
		resp, timedOut, err := c.transmit(&a)
		k.hookEnd = a.end
		k.classify(r, resp, err, timedOut)
	}
	if c.metrics != nil {
		c.metrics.attempt(r.outcome)
	}
	var o admission.Outcome
	r.told(&o)
	o.Latency = k.latency
	k.failing = k.t.Done(&o)
}

// prepared is an attempt ready to go: its request, its per-attempt
// timeout's cancel, and the attempt hook's end.
type prepared struct {
	r      *http.Request
	cancel context.CancelCauseFunc // with a per-attempt timeout only
	end    func(AttemptEnd)
}

// prepare builds attempt n's request under base, the request's context
// or (fresh) a hedged copy's, and calls the attempt hook. It runs on the
// goroutine of RoundTrip, hedged copies included, so that the hook does.
// It knows whether the context is new without comparing contexts:
// context.Background's, a struct, compares by a call.
func (k *call) prepare(base context.Context, fresh bool, n int, body io.ReadCloser, hedge bool) (a prepared) {
	c := k.c
	ctx, m, wrapped := k.attemptContext(base)
	fresh = fresh || wrapped
	if c.perAttemptTimeout > 0 {
		ctx, a.cancel = context.WithCancelCause(ctx)
		fresh = true
	}
	header := k.header
	if c.freshHeader {
		header = k.attemptHeader(n)
	}
	if c.attemptHook != nil {
		var hooked bool
		ctx, a.end, hooked = k.hook(ctx, n, header, hedge)
		fresh = fresh || hooked
	}
	a.r = k.attemptRequest(m, ctx, fresh, body, header)
	return a
}

// attemptRequest is the request an attempt sends: req itself, unless its
// context is fresh, or its body or header is not req's: then a copy (in
// m's storage, with a mark).
func (k *call) attemptRequest(m *ownedRequest, ctx context.Context, fresh bool, body io.ReadCloser, header http.Header) *http.Request {
	req := k.req
	changed := body != req.Body || header != nil
	if !fresh && !changed {
		return req
	}
	var r *http.Request
	if m == nil && k.body.spare != nil {
		// The first attempt's, whose counted body makes it a copy.
		r, k.body.spare = k.body.spare, nil
		*r = *req.WithContext(ctx)
	} else {
		r = withContext(m, req, ctx)
	}
	if changed {
		r.Body = body
		if header != nil {
			r.Header = header
		}
		r.GetBody = k.body.getBody(k.ctx, req, k.replayable)
	}
	return r
}

// hook calls the attempt hook, and returns the attempt's context, the
// hook's end, and whether the hook gave a context of its own.
func (k *call) hook(ctx context.Context, n int, header http.Header, hedge bool) (context.Context, func(AttemptEnd), bool) {
	c := k.c
	hctx, end := c.attemptHook(ctx, AttemptStart{Request: k.req, Header: header,
		Attempt: n, MaxAttempts: c.maxAttempts, Delay: k.lastDelay, Hedge: hedge, Name: c.displayName(), Criticality: levelCriticality(c.level)})
	if hctx == nil || hctx == ctx {
		return ctx, end, false
	}
	return hctx, end, true
}

// attemptContext is an attempt's context under base: with the trace that
// tells whether it was sent, the addresses its request tried
// (WithAddressRotation), and the mark that an outer Transport owns its
// retries (with markOwner: m holds the mark and the attempt's request, in
// one allocation).
func (k *call) attemptContext(base context.Context) (ctx context.Context, m *ownedRequest, wrapped bool) {
	c := k.c
	ctx = base
	wrapped = k.sent.gotConn != nil || c.rotate || c.markOwner
	if g := k.sent.gotConn; g != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { g.Store(true) },
		})
	}
	if c.rotate {
		if k.tried == nil {
			k.tried = new(rotation.Tried)
		}
		ctx = rotation.WithTried(ctx, k.tried) // hedged copies share it
	}
	if c.markOwner {
		m = markOwned(ctx)
		ctx = &m.ctx
	}
	return ctx, m, wrapped
}

// attemptHeader is attempt n's header, a fresh copy of the request's (or
// the injected key's), with WithAttemptHeader's, WithCriticalityHeader's
// and WithDeadlineHeader's values.
func (k *call) attemptHeader(n int) http.Header {
	c, header := k.c, k.header
	// A fresh map for each attempt: the base may still be reading the
	// previous attempt's headers.
	if header == nil {
		header = k.req.Header
	}
	header = header.Clone()
	if c.attemptHeader != "" {
		header.Set(c.attemptHeader, c.attemptValueFor(n, c.maxAttempts))
	}
	if c.levelHeader != "" {
		header.Set(c.levelHeader, levelText(c.level))
	}
	if c.deadlineHeader == "" {
		return header
	}
	if left, ok := k.timeLeft(); ok {
		// Rounded up: "0" would say no time at all is left.
		header.Set(c.deadlineHeader, strconv.FormatInt(int64((left+time.Millisecond-1)/time.Millisecond), 10))
	}
	return header
}

// timeLeft is what is left of the smaller of the context's deadline and
// the per-attempt timeout, at an attempt's start, if either is set.
func (k *call) timeLeft() (time.Duration, bool) {
	left, ok := k.c.perAttemptTimeout, k.c.perAttemptTimeout > 0
	if dl := k.ctxEnd; !dl.IsZero() {
		if d := time.Until(dl); !ok || d < left {
			left, ok = d, true
		}
	}
	return max(left, 0), ok
}

// transmit sends a prepared attempt through the base, under the
// per-attempt timeout if one is set. It calls nothing of the user's but
// the base, so that it may run on a hedged copy's goroutine.
func (c *config) transmit(a *prepared) (resp *http.Response, timedOut bool, err error) {
	if a.cancel == nil {
		resp, err = c.sendChecked(a.r)
		return resp, false, err
	}
	cancel := a.cancel
	timer := time.AfterFunc(c.perAttemptTimeout, func() { cancel(ErrAttemptTimeout) })
	resp, err = c.sendChecked(a.r)
	if !timer.Stop() && context.Cause(a.r.Context()) == ErrAttemptTimeout {
		if resp != nil {
			resp.Body.Close()
		}
		cancel(context.Canceled)
		return nil, true, &attemptTimeoutError{c.perAttemptTimeout, err}
	}
	if err != nil {
		cancel(context.Canceled)
		return nil, false, err
	}
	resp.Body = wrapCancel(resp.Body, cancel)
	return resp, false, nil
}

// sendChecked sends r through the base, bypassing the retries of a
// Transport that base is (send), and keeps the RoundTripper contract for
// a base that breaks it: a response that comes with an error is closed
// and dropped.
func (c *config) sendChecked(r *http.Request) (resp *http.Response, err error) {
	if c.inner != nil {
		resp, err = c.inner.config().send(r)
	} else {
		resp, err = c.base.RoundTrip(r)
	}
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
	if unprocessed(err) || errors.Is(err, replay.ErrTooLong) {
		return true
	}
	switch {
	case k.sent.gotConn == nil:
		return isDialError(err)
	case k.sent.alone:
		return !k.sent.gotConn.Load()
	}
	return isDialError(err) && !k.sent.gotConn.Load()
}

// lengthMismatch reports whether the body GetBody gives is not the length
// the request declares: net/http refuses to send such a request (with an
// untyped error), and would refuse every retry alike. It reads a body
// from GetBody, on the failure path only, once the attempt's is closed.
func (k *call) lengthMismatch() bool {
	cl := k.req.ContentLength
	if k.body.open == nil || cl <= 0 || k.body.open.Wait(k.ctx, k.end()) != nil {
		// Not GetBody's, or one attempt (nothing to retry, and its body
		// is not counted), or its body is still open.
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
