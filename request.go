// This file holds per-request control: options carried by a request's
// context, so that code deep in an SDK call can change one request's
// policy without seeing the Transport.

package retryhttp

import (
	"context"
	"errors"
	"net/http"
)

type requestOptionsKey struct{}

// requestOptions are the options of one request, already validated: err
// is what was wrong with them, for RoundTrip to return.
type requestOptions struct {
	opts []RequestOption
	err  error
}

// WithRequestOptions returns a context that carries opts for the requests
// made with it: they apply on top of the Transport's own options, for
// those requests only (and over those of a policy's operation that
// matches them). It never panics: with an invalid option, RoundTrip
// sends nothing and returns an [*Error] that names it, failing one
// request, not the process. A request without them costs nothing more
// than one context lookup.
func WithRequestOptions(ctx context.Context, opts ...RequestOption) context.Context {
	var scratch config
	ro := &requestOptions{}
	if prev, ok := ctx.Value(requestOptionsKey{}).(*requestOptions); ok {
		ro.opts, ro.err = append(ro.opts, prev.opts...), prev.err
	}
	for _, o := range opts {
		if err := o.apply(&scratch); err != nil {
			ro.err = errors.Join(ro.err, err)
			continue
		}
		ro.opts = append(ro.opts, o)
	}
	return context.WithValue(ctx, requestOptionsKey{}, ro)
}

// NoRetry returns a context whose requests are sent once: the short way of
// WithRequestOptions(ctx, WithMaxAttempts(1)).
func NoRetry(ctx context.Context) context.Context {
	return WithRequestOptions(ctx, WithMaxAttempts(1))
}

// forRequest returns the config of req's operation (c, unless a policy's
// operation matches it) with ro, the request's own options (nil: none),
// applied. RoundTrip calls it only if there is either.
func (c *config) forRequest(req *http.Request, ro *requestOptions) (*config, error) {
	if len(c.operations) > 0 {
		c = c.operationFor(req)
	}
	if ro == nil {
		return c, nil
	}
	if ro.err != nil {
		return nil, ro.err
	}
	rc := *c
	for _, o := range ro.opts {
		o.apply(&rc) // validated by WithRequestOptions
	}
	rc.schedule = scheduleLength(rc.backoff, rc.maxAttempts)
	return &rc, nil
}
