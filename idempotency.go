// This file decides whether a request may be sent more than once: by its
// method (RFC 9110 section 9.2.2) and by an idempotency key, which it can
// also inject. Which outcomes are worth retrying is status.go's business.

package retryhttp

import (
	"net/http"

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
// Like net/http, it looks at the canonical names only and counts a header
// that is present with a nil value (which net/http does not send but still
// treats as a key).
func hasIdempotencyKey(h http.Header) bool {
	if h == nil {
		return false
	}
	_, ok := h[HeaderIdempotencyKey]
	if !ok {
		_, ok = h[HeaderXIdempotencyKey]
	}
	return ok
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
