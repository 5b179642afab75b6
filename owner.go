// This file keeps one retry owner per path: when Transports are nested (an
// SDK that already uses one, wrapped again), only the outermost retries.
// See "Nested Transports" in doc.go.

package retryhttp

import (
	"context"
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

// owned reports whether an outer Transport owns the retries of ctx.
func owned(ctx context.Context) bool { return ctx.Value(ownerKey{}) != nil }

// markOwned marks ctx as owned by this Transport's retries.
func markOwned(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, true)
}

// send passes one attempt to the base, bypassing the retries of a
// Transport that base is.
func (c *config) send(req *http.Request) (*http.Response, error) {
	if c.inner != nil {
		return c.inner.config().send(req)
	}
	return c.base.RoundTrip(req)
}
