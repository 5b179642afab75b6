// This file decides whether a request may be sent more than once: by its
// method (RFC 9110 section 9.2.2) and by an idempotency key, which it can
// also inject. Which outcomes are worth retrying is status.go's business.

package retryhttp

import (
	"net/http"
	"strings"

	"github.com/google/uuid"
)

// The two headers that net/http itself treats as marking a request
// replayable (Request.isReplayable in net/http/request.go).
const (
	HeaderIdempotencyKey  = "Idempotency-Key"
	HeaderXIdempotencyKey = "X-Idempotency-Key"
)

// idempotentMethod reports whether RFC 9110 defines method as idempotent.
// The empty method means GET, as in net/http.
func idempotentMethod(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

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
	if _, ok := h[HeaderXIdempotencyKey]; ok {
		return true
	}
	if !thorough {
		return false
	}
	for k := range h {
		if strings.EqualFold(k, HeaderIdempotencyKey) || strings.EqualFold(k, HeaderXIdempotencyKey) {
			return true
		}
	}
	return false
}

// NewUUIDKey returns a random (version 4) UUID in its plain 36-character
// form, unquoted, as Stripe-style APIs expect. It is the default key
// generator of WithIdempotencyKeys.
func NewUUIDKey() string { return uuid.NewString() }

// NewQuotedUUIDKey returns a random UUID as a quoted string, the
// Structured Field form that the IETF Idempotency-Key draft specifies
// (Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"). Pass it to
// WithKeyGenerator for servers that follow the draft to the letter.
func NewQuotedUUIDKey() string { return `"` + uuid.NewString() + `"` }

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
