package ratelimit

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/internal/vendors"
)

// Wait is the wait a response asks for, from the most specific signal it
// carries, in this order:
//
//  1. the millisecond headers of internal/vendors, in its order:
//     retry-after-ms (OpenAI, Anthropic), Azure's x-ms-retry-after-ms,
//     then x-amz-retry-after (the AWS SDKs);
//  2. Retry-After: seconds or an HTTP-date (RFC 9110);
//  3. then the limits Items reads, by rank: of the first rank with a limit
//     spent (nothing left), the latest reset.
//
// Malformed values are ignored. A value too large to represent is
// MaxWait (it exceeds any cap, so that the response comes back at once),
// never no hint. ok is false when none applies.
func Wait(h http.Header, now time.Time) (time.Duration, bool) {
	// A response without a field that Wait reads (by its canonical name,
	// the one h.Get finds), most errors, reads nothing more.
	hinted := false
	for k := range h {
		if strings.HasPrefix(k, "Retry-After") || strings.HasPrefix(k, "Ratelimit") ||
			strings.HasPrefix(k, "X-Ratelimit") || strings.HasPrefix(k, "Anthropic-Ratelimit") ||
			slices.Contains(vendors.MillisHeaders, k) {
			hinted = true
			break
		}
	}
	if !hinted {
		return 0, false
	}
	for _, name := range vendors.MillisHeaders {
		if d, ok := Millis(h.Get(name)); ok {
			return d, true
		}
	}
	if d, ok := RetryAfter(h.Get("Retry-After"), now); ok {
		return d, true
	}
	var wait time.Duration
	var rank Rank
	Items(h, now, func(it Item) {
		if it.Remaining == 0 && (rank == 0 || it.Rank == rank) {
			wait, rank = max(wait, it.Reset), it.Rank
		}
	})
	return wait, rank != 0
}

// ShouldRetry reads the should-retry headers of internal/vendors
// (x-should-retry, Stripe-Should-Retry): "true" or "false", or neither. A
// "false" in any of them is final.
func ShouldRetry(h http.Header) (retry, said bool) {
	for _, name := range vendors.ShouldRetryHeaders {
		switch strings.ToLower(strings.TrimSpace(h.Get(name))) {
		case "true":
			retry, said = true, true
		case "false":
			return false, true
		}
	}
	return retry, said
}

// Throttled reports whether a 403 is a throttle: GitHub sends its primary
// rate limit as 403 with X-RateLimit-Remaining: 0, and its secondary rate
// limit as 403 with Retry-After (and requests remaining). A plain 403 is
// final.
func Throttled(code int, h http.Header) bool {
	return code == http.StatusForbidden && (Zero(h.Get("X-RateLimit-Remaining")) || h.Get("Retry-After") != "")
}
