// This file holds what tells that a request may be sent more than once,
// beside its method (RFC 9110 section 9.2.2, applied with these in
// attempt.go's key): an idempotency key, which it can also inject, and a
// declaration (Idempotent, NotIdempotent, WithIdempotentIf). Which
// outcomes are worth retrying is status.go's business.

package retryhttp

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/google/uuid"
)

// HeaderIdempotencyKey is the header that WithIdempotencyKeys adds. It and
// X-Idempotency-Key are the two headers that net/http itself treats as
// marking a request replayable (Request.isReplayable in
// net/http/request.go); a request that carries either is keyed.
const HeaderIdempotencyKey = "Idempotency-Key"

const headerXIdempotencyKey = "X-Idempotency-Key"

// hasIdempotencyKey reports whether h carries one of the two key headers.
// Like net/http, it counts a header that is present with a nil value (which
// net/http does not send but still treats as a key). It looks at the
// canonical names first, then, if thorough and neither is there, at every
// key of h without regard to case, so that a key set by map assignment
// (h["idempotency-key"]) is seen and never doubled by an injected one. The
// loop is for non-idempotent methods only: a GET that succeeds does not pay
// for it.
func hasIdempotencyKey(h http.Header, thorough bool) bool {
	if len(h) == 0 {
		return false
	}
	if _, ok := h[HeaderIdempotencyKey]; ok {
		return true
	}
	if _, ok := h[headerXIdempotencyKey]; ok {
		return true
	}
	if !thorough {
		return false
	}
	for k := range h {
		if strings.EqualFold(k, HeaderIdempotencyKey) || strings.EqualFold(k, headerXIdempotencyKey) {
			return true
		}
	}
	return false
}

// withKey is a copy of h with key as its Idempotency-Key: the header of a
// request that WithIdempotencyKeys gives a key.
func withKey(h http.Header, key string) http.Header {
	h = h.Clone()
	h.Set(HeaderIdempotencyKey, key)
	return h
}

// NewUUIDKey returns a random (version 4) UUID in its plain 36-character
// form, unquoted, as Stripe-style APIs expect. It is the default key
// generator of WithIdempotencyKeys.
func NewUUIDKey() string { return uuid.NewString() }

// methodSet is a small set of methods; it is tiny, so a slice beats a map.
type methodSet []string

func (s methodSet) has(method string) bool {
	if method == "" {
		method = http.MethodGet
	}
	for _, m := range s {
		if m == method {
			return true
		}
	}
	return false
}

// Idempotent returns a context whose requests are declared safe to repeat,
// whatever their method: they are retried like a GET, and no key is added.
// Declare it for requests that only read, or whose effect the server makes
// once, over a method that RFC 9110 does not call idempotent: DynamoDB's
// GetItem and Query, Elasticsearch's _search, a GraphQL query, a chat
// completion. It costs a request nothing more than one context lookup.
func Idempotent(ctx context.Context) context.Context {
	return WithRequestOptions(ctx, requestOption("Idempotent", func(c *config) error {
		c.declaredSafe, c.notIdempotent = alwaysSafe, false
		return nil
	}))
}

func alwaysSafe(*http.Request) bool { return true }

// NotIdempotent returns a context whose requests are declared unsafe to
// repeat, whatever their method: a PUT that issues a certificate, a DELETE
// that charges. Such a request is sent again only when it provably never
// reached the server (its connection failed, or HTTP/2 refused its
// stream), or when it carries an idempotency key (the caller's, or one
// that WithIdempotencyKeys adds for its method), since the server then
// deduplicates it. It overrides Idempotent and WithIdempotentIf.
func NotIdempotent(ctx context.Context) context.Context {
	return WithRequestOptions(ctx, notIdempotentOption())
}

func notIdempotentOption() RequestOption {
	return requestOption("NotIdempotent", func(c *config) error {
		c.notIdempotent, c.declaredSafe = true, nil
		return nil
	})
}

// WithIdempotentIf declares which requests are safe to repeat, whatever
// their method (as Idempotent does for one request): safe is called once
// per request that is not already retried by its method or a key, before
// its first attempt, on the goroutine of RoundTrip; it must not read the
// body. The default declares none. For one request, use Idempotent.
func WithIdempotentIf(safe func(*http.Request) bool) Option {
	return option("WithIdempotentIf", func(c *config) error {
		if safe == nil {
			return optErr("WithIdempotentIf(nil)", "a function is required")
		}
		c.declaredSafe, c.notIdempotent = safe, false
		return nil
	})
}

// routes matches requests against "METHOD pattern" entries, such as
// "POST /*/_search" (path.Match patterns on the URL path; the method "*"
// is any method): a policy's idempotent_requests and its operations' match.
type routes []route

type route struct{ method, pattern string }

// parseRoutes parses "METHOD pattern" entries.
func parseRoutes(entries []string) (routes, error) {
	var rs routes
	for _, e := range entries {
		method, pattern, ok := strings.Cut(strings.TrimSpace(e), " ")
		pattern = strings.TrimSpace(pattern)
		if !ok || !validHeaderName(method) || !strings.HasPrefix(pattern, "/") {
			return nil, fmt.Errorf("%q is not \"METHOD /path/pattern\"", e)
		}
		if _, err := path.Match(pattern, "/"); err != nil {
			return nil, fmt.Errorf("%q: %v", e, err)
		}
		rs = append(rs, route{strings.ToUpper(method), pattern})
	}
	return rs, nil
}

func (rs routes) match(r *http.Request) bool {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	p := r.URL.Path
	if p == "" {
		p = "/" // http://h is http://h/
	}
	for _, x := range rs {
		if x.method == method || x.method == "*" {
			if ok, _ := path.Match(x.pattern, p); ok {
				return true
			}
		}
	}
	return false
}
