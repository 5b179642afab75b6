// This file reads the rate-limit signals that a response may carry beside
// Retry-After (retryafter.go): how long the server asks the client to
// wait, whether it says to retry at all (x-should-retry), and whether a
// 403 is a throttle. The wait goes through the same rules as Retry-After
// (decide.go): capped by WithMaxRetryAfter (policy.go), never started
// past a deadline.

package retryhttp

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"regexp"
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
//  2. x-amz-retry-after: milliseconds (the AWS SDKs);
//  3. Retry-After: seconds or an HTTP-date (RFC 9110);
//  4. RateLimit: the IETF field (draft-ietf-httpapi-ratelimit-headers),
//     on one line or several, when an item says r=0 (no requests left):
//     wait its t seconds; the older form "remaining=0, reset=N" too;
//  5. RateLimit-Reset, with RateLimit-Remaining: 0, and
//  6. X-RateLimit-Reset, with X-RateLimit-Remaining: 0: a Unix time in
//     seconds (GitHub, GitLab) when it is not before yesterday, else
//     seconds from now;
//  7. x-ratelimit-reset-requests or -tokens, with the matching
//     x-ratelimit-remaining-requests or -tokens at 0: a Go-style duration,
//     "6m0s", "20ms" (OpenAI); the longer of the two;
//  8. anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset,
//     an RFC 3339 time, for each kind whose remaining count is 0 or not
//     given (Anthropic); the latest.
//
// Malformed values are ignored. A value too large to represent is the
// longest wait there is (it exceeds any WithMaxRetryAfter, so that the
// response comes back at once), never no hint. ok is false when none
// applies.
func rateLimitWait(h http.Header, now time.Time) (time.Duration, bool) {
	if len(h) == 0 {
		return 0, false
	}
	for _, name := range [...]string{"Retry-After-Ms", "X-Ms-Retry-After-Ms", "X-Amz-Retry-After"} {
		if d, ok := hintMillis(h.Get(name)); ok {
			return d, true
		}
	}
	if d, ok := ParseRetryAfter(h.Get("Retry-After"), now); ok {
		return d, true
	}
	if lines := h.Values("Ratelimit"); len(lines) > 0 {
		// One field on several lines is one list (RFC 9110 §5.3); each
		// line is read alone, so that the older form's parameters of one
		// line are not taken for another's.
		var wait time.Duration
		var found bool
		for _, line := range lines {
			if d, ok := ietfRateLimit(line); ok {
				wait, found = max(wait, d), true
			}
		}
		if !found && len(lines) > 1 { // the older form's parameters split over lines
			wait, found = ietfRateLimit(strings.Join(lines, ","))
		}
		if found {
			return wait, true
		}
	}
	for _, family := range [...]string{"Ratelimit", "X-Ratelimit"} {
		if zero(h.Get(family + "-Remaining")) {
			if d, ok := resetAt(h.Get(family+"-Reset"), now); ok {
				return d, true
			}
		}
	}
	var wait time.Duration
	var found bool
	for _, kind := range [...]string{"requests", "tokens"} {
		if zero(h.Get("X-Ratelimit-Remaining-" + kind)) {
			if d, ok := goDuration(h.Get("X-Ratelimit-Reset-" + kind)); ok {
				wait, found = max(wait, d), true
			}
		}
	}
	if found {
		return wait, true
	}
	for _, kind := range [...]string{"requests", "tokens", "input-tokens", "output-tokens"} {
		reset := h.Get("Anthropic-Ratelimit-" + kind + "-Reset")
		if left := h.Get("Anthropic-Ratelimit-" + kind + "-Remaining"); reset == "" || (left != "" && !zero(left)) {
			continue
		}
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(reset)); err == nil {
			wait, found = max(wait, min(max(t.Sub(now), 0), maxHint)), true
		}
	}
	return wait, found
}

// maxHint is the longest wait a hint can ask for: 2^32 seconds, far beyond
// any WithMaxRetryAfter, so that a larger value still means "longer than
// we will wait".
const maxHint = maxRetryAfterSeconds * time.Second

// hintMillis parses a non-negative count of milliseconds, fractions allowed;
// one too large to represent is maxHint.
func hintMillis(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if !decimal.MatchString(v) {
		return 0, false
	}
	ms, err := strconv.ParseFloat(v, 64)
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || ms < 0 || math.IsNaN(ms) {
		return 0, false
	}
	if ms >= float64(maxHint/time.Millisecond) {
		return maxHint, true
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}

// zero reports whether a remaining count is 0.
func zero(v string) bool {
	v = strings.TrimSpace(v)
	return v != "" && strings.Trim(v, "0") == ""
}

// count parses a non-negative whole number, saturating at 2^32 (a value
// of any length, such as 10^20, is read as that bound, not refused).
func count(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n < 1<<40 {
			n = n*10 + int64(c-'0')
		}
	}
	return n, true
}

// seconds parses a non-negative count of seconds, saturating at maxHint.
func seconds(v string) (time.Duration, bool) {
	n, ok := count(v)
	if !ok {
		return 0, false
	}
	return time.Duration(min(n, maxRetryAfterSeconds)) * time.Second, true
}

// resetAt parses a reset field: a Unix time in seconds when it is one
// (from 2001 on, or not before yesterday by the clock: GitHub's
// X-RateLimit-Reset, GitLab's RateLimit-Reset), or in milliseconds (13
// or 14 digits), else seconds from now (the IETF draft's). A Unix time in
// the past is 0.
func resetAt(v string, now time.Time) (time.Duration, bool) {
	n, ok := count(v)
	if !ok {
		return 0, false
	}
	if n >= 1e12 && n < 1e15 { // a Unix time in milliseconds
		return min(max(time.UnixMilli(n).Sub(now), 0), maxHint), true
	}
	if (n >= 1e9 || n >= now.Unix()-24*60*60) && n < 1e12 {
		return min(max(time.Unix(n, 0).Sub(now), 0), maxHint), true
	}
	return time.Duration(min(n, maxRetryAfterSeconds)) * time.Second, true
}

// goDuration parses a Go-style duration ("6m0s", "20ms"); one too large to
// represent ("9999999h") is maxHint.
func goDuration(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	d, err := time.ParseDuration(v)
	switch {
	case err == nil && d >= 0:
		return min(d, maxHint), true
	case err != nil && durationSyntax.MatchString(v):
		return maxHint, true // well formed: too large for a time.Duration
	}
	return 0, false
}

// decimal is the one grammar of a millisecond hint: digits, a fraction,
// an exponent (1e15, 1.5E3), no sign, no inf, no hex, no _.
var decimal = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

var durationSyntax = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$`)

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

// throttled reports whether a 403 is a throttle: GitHub sends its primary
// rate limit as 403 with X-RateLimit-Remaining: 0, and its secondary rate
// limit as 403 with Retry-After (and requests remaining). A plain 403 is
// final.
func throttled(code int, h http.Header) bool {
	return code == http.StatusForbidden && (zero(h.Get("X-RateLimit-Remaining")) || h.Get("Retry-After") != "")
}
