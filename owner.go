// This file keeps one retry owner per path: when Transports are nested (an
// SDK that already uses one, wrapped again), only the outermost retries.
// See "Nested Transports" in doc.go.

package retryhttp

import (
	"context"
	"fmt"
	"github.com/retryhttp/retryhttp/internal/rotation"
	"net/http"
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

// owned reports whether an outer Transport owns the retries of ctx.
func owned(ctx context.Context) bool { return ctx.Value(ownerKey{}) != nil }

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
