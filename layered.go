// This file keeps one owner of a request's retries. Nested Transports: an
// inner one (an SDK that already uses one, wrapped again) passes each
// attempt through, and only the outermost retries (see "Nested
// Transports" in doc.go). Retrying layers above: a request that reaches
// the Transport as a retry of an SDK or another retrying layer is counted
// (retryhttp_layered_retries_total) and logged once per source, and a
// marked one owns its schedule, so that the retries hidden in a stack are
// known and not multiplied.

package retryhttp

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/retryhttp/retryhttp/internal/recent"
	"github.com/retryhttp/retryhttp/internal/rotation"
)

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
		case *http.Transport, *rotation.Transport:
			return nil, false
		case unwrapper:
			rt = b.Unwrap()
		default:
			return nil, true
		}
	}
	return nil, true
}

// ownedCtx is a context marked as owned by an outer Transport's retries:
// context.WithValue(parent, ownerKey{}, true), but of a type of our own, so
// that it can live in one allocation with the request that carries it.
// Its Done, Err and Deadline are the parent's, and so is every other
// value: a middleware's derived context or req.Clone keeps the mark.
type ownedCtx struct{ context.Context }

func (c *ownedCtx) Value(key any) any {
	if _, ok := key.(ownerKey); ok {
		return true
	}
	return c.Context.Value(key)
}

func (c *ownedCtx) String() string { return fmt.Sprint(c.Context) + ".WithValue(retryhttp.owner)" }

// ownedRequest is an attempt's request and the mark in its context,
// allocated together: marking costs one allocation, the request's copy
// that a new context needs anyway, and not two.
type ownedRequest struct {
	r   http.Request
	ctx ownedCtx
}

// markOwned returns storage for an attempt's request whose context,
// &m.ctx, is parent marked as owned by this Transport's retries.
func markOwned(parent context.Context) *ownedRequest {
	m := new(ownedRequest)
	m.ctx.Context = parent
	return m
}

// markedCopy is the copy of req, with its context ctx marked as owned by
// this Transport's retries, that an attempt which adds nothing else to
// req sends: in one allocation.
func markedCopy(req *http.Request, ctx context.Context) *http.Request {
	m := markOwned(ctx)
	return withContext(m, req, &m.ctx)
}

// withContext is req.WithContext(ctx), made in m's storage if m is not nil.
func withContext(m *ownedRequest, req *http.Request, ctx context.Context) *http.Request {
	if m == nil {
		return req.WithContext(ctx)
	}
	// WithContext is inlined and the copy it makes does not escape: it
	// stays on the stack, and m.r is the only one on the heap.
	m.r = *req.WithContext(ctx)
	return &m.r
}

// send passes one attempt to the base, bypassing the retries of a
// Transport that base is.
func (c *config) send(req *http.Request) (*http.Response, error) {
	if c.inner != nil {
		return c.inner.config().send(req)
	}
	return c.base.RoundTrip(req)
}

// A layered retry's source: which layer above said it was retrying.
const (
	layerAWS       = iota // amz-sdk-request: attempt=N, N > 1 (AWS SDKs)
	layerStainless        // X-Stainless-Retry-Count > 0 (OpenAI, Anthropic SDKs)
	layerGRPC             // grpc-previous-rpc-attempts > 0 (gRPC over HTTP)
	layerRetryhttp        // the attempt header of another retryhttp Transport
	layerKey              // an Idempotency-Key seen again within a minute
	layerAzure            // an x-ms-client-request-id seen again within a minute (Azure SDKs)
	layerRepeat           // the same request again, right after it failed in a way worth retrying
	numLayers
)

var layerLabels = [numLayers]string{"aws-sdk", "stainless-sdk", "grpc", "retryhttp", "idempotency-key", "azure-sdk", "repeat"}

// layers is one Transport's view of the layers above it.
type layers struct {
	warned [numLayers]atomic.Bool
	keys   recent.Keys
	failed recent.Failures
	owners recent.Owners // the hosts a layer above retried lately: it owns every request to them for a minute
	noted  atomic.Bool   // failed or owners holds anything: until then a request with no header asks neither
}

// detectLayered looks at a request for the marks of a retry made above,
// and asks whether it is the same request again right after a failure,
// or goes to a host a layer above owns. newCall calls it for a request
// that has headers, or once a layer above was seen.
func (k *call) detectLayered(method string) {
	c, h := k.c, k.req.Header
	if v := h["Amz-Sdk-Request"]; len(v) > 0 {
		switch attempt, most := awsAttempt(v[0]); {
		case attempt > 1:
			k.layered(layerAWS)
		case most > 1:
			k.owned = true // its first try, of a schedule the SDK says is its own
		}
	}
	if retried(h["X-Stainless-Retry-Count"]) {
		k.layered(layerStainless)
	}
	if retried(h["Grpc-Previous-Rpc-Attempts"]) {
		k.layered(layerGRPC)
	}
	if a := c.attemptHeader; a != "" {
		// Our own header, from a Transport above: a retry if it says
		// other than its first attempt would.
		if v := h[a]; len(v) > 0 && v[0] != c.attemptValueFor(1, c.maxAttempts) {
			k.layered(layerRetryhttp)
		}
	}
	k.detectSeenAgain(h)
	if !k.repeat && c.layers.failed.Again(k.req, method, recent.Second) {
		// Counted once: a retry a layer above marked is not also a repeat.
		k.layered(layerRepeat)
	}
	if !k.owned {
		k.owned = c.layers.owners.Own(k.req.URL.Host, recent.Second)
	}
}

// retried reports whether a retry-count header's values say a retry: an
// integer greater than 0 ("00", "-1" and "abc" do not).
func retried(v []string) bool {
	if len(v) == 0 {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v[0]))
	return err == nil && n > 0
}

// detectSeenAgain looks for the ids a layer above keeps across its tries,
// seen again within a minute: the caller's own Idempotency-Key (not an
// injected one, and not on a redirect's hop, onto which http.Client
// copies the headers), and an Azure SDK's x-ms-client-request-id.
func (k *call) detectSeenAgain(h http.Header) {
	host := k.req.URL.Host
	if k.keyed && k.header == nil && k.req.Response == nil {
		key := h.Get(HeaderIdempotencyKey)
		if key == "" {
			key = h.Get(headerXIdempotencyKey)
		}
		if key != "" && k.c.layers.keys.Seen(host+" "+key, recent.Second()) {
			k.layered(layerKey)
		}
	}
	if v := h["X-Ms-Client-Request-Id"]; len(v) > 0 && v[0] != "" && k.c.layers.keys.Seen(host+" azure "+v[0], recent.Second()) {
		k.layered(layerAzure)
	}
}

// awsAttempt reads an amz-sdk-request value ("attempt=2; max=3"): the
// SDK's attempt and its most attempts, 0 where it does not say.
func awsAttempt(v string) (attempt, most int) {
	for part := range strings.SplitSeq(v, ";") {
		part = strings.TrimSpace(part)
		if n, ok := strings.CutPrefix(part, "attempt="); ok {
			attempt, _ = strconv.Atoi(n)
		} else if n, ok := strings.CutPrefix(part, "max="); ok {
			most, _ = strconv.Atoi(n)
		}
	}
	return attempt, most
}

// failedAgain records a request that ends on a failure worth retrying,
// for recentFailures.
func (k *call) failedAgain() {
	method := k.req.Method
	if method == "" {
		method = http.MethodGet
	}
	k.c.layers.failed.Record(k.req, method, recent.Second())
	k.c.layers.noted.Store(true)
}

// layered notes a request that is a layer above's retry, from source:
// it is counted and warned of once per source. One that the layer says
// is its retry (a header, its key again) is charged to the budget as a
// retry, and the layer above owns its schedule: retryhttp saves a
// transient failure inside one of its tries (one retry, none while the
// host is failing), never holds one, and does not warn of giving one up.
// A marker that only a retrying layer sends (an SDK's attempt header, a
// nested retryhttp's, an Azure SDK's request id again) makes the layer
// own every request to the host for a minute too. A key seen again does
// not: an application that re-submits a keyed request, or two callers
// that share a key, are not a retrying layer, and the host keeps its
// defaults for everyone else. The same request again after a failure is
// only counted: many callers of one URL look alike.
func (k *call) layered(source int) {
	c := k.c
	switch source {
	case layerRepeat:
	case layerKey:
		k.repeat, k.owned = true, true
	default:
		k.repeat, k.owned = true, true
		c.layers.owners.Note(k.req.URL.Host, recent.Second())
		c.layers.noted.Store(true)
	}
	c.metrics.layeredRetry(source)
	if c.logger != nil && c.layers.warned[source].CompareAndSwap(false, true) {
		advice := k.layerAdvice(source)
		if !k.replayable && source != layerRetryhttp {
			// Turning the layer above off would leave this request with
			// no retry at all: say how to declare it first.
			advice = advice + "; but this " + k.req.Method + " is one retryhttp does not retry (not idempotent, no key): if such requests are safe to repeat, " +
				"declare them first (retryhttp.Idempotent(ctx), WithIdempotentIf, or a policy's semantic_safety), or nothing will retry them"
		}
		c.logger.LogAttrs(k.ctx, slog.LevelWarn, "retryhttp: a layer above retries too",
			slog.String("name", c.displayName()),
			slog.String("source", layerLabels[source]),
			slog.String("host", k.req.URL.Host),
			slog.String("advice", advice))
	}
}

// maxAttempts is the request's attempts in all: WithMaxAttempts, or, when
// a layer above owns its schedule, two (one retry, to save a transient
// failure inside the layer's try), one while the host is failing.
func (k *call) maxAttempts() int {
	switch {
	case !k.owned:
		return k.c.maxAttempts
	case k.failing:
		return 1
	}
	return min(k.c.maxAttempts, 2)
}
