package ratelimit

import (
	"net/http"
	"strings"
	"time"
)

// Wait is the wait a response asks for, from the most specific signal it
// carries, in this order:
//
//  1. retry-after-ms: milliseconds (OpenAI, Anthropic), and Azure's
//     x-ms-retry-after-ms;
//  2. x-amz-retry-after: milliseconds (the AWS SDKs);
//  3. Retry-After: seconds or an HTTP-date (RFC 9110);
//  4. then the limits Items reads, by rank: of the first rank with a limit
//     spent (nothing left), the latest reset.
//
// Malformed values are ignored. A value too large to represent is
// MaxWait (it exceeds any cap, so that the response comes back at once),
// never no hint. ok is false when none applies.
func Wait(h http.Header, now time.Time) (time.Duration, bool) {
	if len(h) == 0 {
		return 0, false
	}
	for _, name := range [...]string{"Retry-After-Ms", "X-Ms-Retry-After-Ms", "X-Amz-Retry-After"} {
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

// ShouldRetry reads x-should-retry: "true" or "false", or neither.
func ShouldRetry(h http.Header) (retry, said bool) {
	switch strings.ToLower(strings.TrimSpace(h.Get("X-Should-Retry"))) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// Throttled reports whether a 403 is a throttle: GitHub sends its primary
// rate limit as 403 with X-RateLimit-Remaining: 0, and its secondary rate
// limit as 403 with Retry-After (and requests remaining). A plain 403 is
// final.
func Throttled(code int, h http.Header) bool {
	return code == http.StatusForbidden && (Zero(h.Get("X-RateLimit-Remaining")) || h.Get("Retry-After") != "")
}
