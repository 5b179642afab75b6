// This file reads the rate-limit signals that a response may carry beside
// Retry-After (retryafter.go): how long the server asks the client to
// wait, whether it says to retry at all (x-should-retry), and whether a
// 403 is a throttle. The wait goes through the same rules as Retry-After
// (decide.go): capped by WithMaxRetryAfter (policy.go), never started
// past a deadline.

package retryhttp

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// hintSpread is how far above a server's hint a wait may go: a wait the
// server asks for (Retry-After and the other rate-limit hints) is drawn in
// [hint, hint × (1 + hintSpread)], so that clients told to come back in a
// second do not all come back in the same millisecond, and none earlier
// than told.
const hintSpread = 0.2

// spread draws a wait in [d, d × (1 + hintSpread)].
func spread(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	extra := time.Duration(float64(d) * hintSpread)
	if extra <= 0 || d > maxRetryAfterSeconds*time.Second {
		return d
	}
	return d + time.Duration(rand.Int64N(int64(extra)+1))
}

// rateLimitWait returns the wait a response asks for, from the most
// specific signal it carries, in this order:
//
//  1. retry-after-ms: milliseconds (OpenAI, Anthropic);
//  2. Retry-After: seconds or an HTTP-date (RFC 9110);
//  3. RateLimit: the IETF field (draft-ietf-httpapi-ratelimit-headers),
//     when it says r=0 (no requests left): wait t seconds; the older form
//     "remaining=0, reset=N" too;
//  4. RateLimit-Reset, with RateLimit-Remaining: 0: seconds;
//  5. X-RateLimit-Reset, with X-RateLimit-Remaining: 0: a Unix time in
//     seconds (GitHub), or seconds when it is small;
//  6. x-ratelimit-reset-requests or -tokens, with the matching
//     x-ratelimit-remaining-requests or -tokens at 0: a Go-style duration,
//     "6m0s", "20ms" (OpenAI); the longer of the two.
//
// Malformed values are ignored. ok is false when none applies.
func rateLimitWait(h http.Header, now time.Time) (time.Duration, bool) {
	if len(h) == 0 {
		return 0, false
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if d, ok := ParseRetryAfter(h.Get("Retry-After"), now); ok {
		return d, true
	}
	if d, ok := ietfRateLimit(h.Get("RateLimit")); ok {
		return d, true
	}
	if zero(h.Get("RateLimit-Remaining")) {
		if d, ok := seconds(h.Get("RateLimit-Reset")); ok {
			return d, true
		}
	}
	if zero(h.Get("X-RateLimit-Remaining")) {
		if d, ok := resetAt(h.Get("X-RateLimit-Reset"), now); ok {
			return d, true
		}
	}
	var wait time.Duration
	var found bool
	for _, kind := range [...]string{"requests", "tokens"} {
		if zero(h.Get("X-Ratelimit-Remaining-" + kind)) {
			if d, err := time.ParseDuration(strings.TrimSpace(h.Get("X-Ratelimit-Reset-" + kind))); err == nil && d >= 0 {
				wait, found = max(wait, d), true
			}
		}
	}
	return wait, found
}

// zero reports whether a remaining count is 0.
func zero(v string) bool {
	v = strings.TrimSpace(v)
	return v != "" && strings.Trim(v, "0") == ""
}

// seconds parses a non-negative count of seconds.
func seconds(v string) (time.Duration, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(min(n, maxRetryAfterSeconds)) * time.Second, true
}

// resetAt parses X-RateLimit-Reset: a Unix time in seconds, or seconds
// from now when it is too small to be one (before 2001).
func resetAt(v string, now time.Time) (time.Duration, bool) {
	d, ok := seconds(v)
	if !ok {
		return 0, false
	}
	if n := int64(d / time.Second); n > 1e9 {
		return max(time.Unix(n, 0).Sub(now), 0), true
	}
	return d, true
}

// ietfRateLimit reads the IETF RateLimit field: a list of items such as
// "default";r=0;t=30 (draft 7 and later), or the older
// "limit=10, remaining=0, reset=5". It gives the wait of an item with
// nothing left, the longest if several.
func ietfRateLimit(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	var wait time.Duration
	var found bool
	remaining, reset := "", ""
	flush := func() {
		if zero(remaining) {
			if d, ok := seconds(reset); ok {
				wait, found = max(wait, d), true
			}
		}
		remaining, reset = "", ""
	}
	for _, item := range strings.Split(v, ",") {
		for _, param := range strings.Split(item, ";") {
			k, val, _ := strings.Cut(strings.TrimSpace(param), "=")
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "r", "remaining":
				remaining = val
			case "t", "reset":
				reset = val
			}
		}
		if strings.Contains(item, ";") { // draft 7+: one item, one policy
			flush()
		}
	}
	flush() // the older form: one item per parameter
	return wait, found
}

// shouldRetry reads x-should-retry: "true" or "false", or neither.
func shouldRetry(h http.Header) (retry, said bool) {
	switch strings.ToLower(strings.TrimSpace(h.Get("X-Should-Retry"))) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// throttled reports whether a 403 is a throttle: GitHub sends its rate
// limits as 403 with X-RateLimit-Remaining: 0. A plain 403 is final.
func throttled(code int, h http.Header) bool {
	return code == http.StatusForbidden && zero(h.Get("X-RateLimit-Remaining"))
}
