// Package ratelimit reads what a response says of its server's limits, in
// one place for every reader: the wait it asks for (Retry-After and the
// other hints), the quotas it states (the IETF RateLimit fields, the
// RateLimit- and X-RateLimit- families, OpenAI's and Anthropic's), the
// sizes RateLimit-Policy gives them, and the words that say whether to
// retry. It needs only net/http; what a caller does with a reading is the
// caller's.
package ratelimit

import (
	"errors"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MaxSeconds bounds delay-seconds so that converting them to a
// time.Duration cannot overflow. It is far beyond any cap a client sets, so
// a larger value still means "longer than we will wait".
const MaxSeconds = 1 << 32

// MaxWait is the longest wait a field can ask for: MaxSeconds, so that a
// larger value still means "longer than we will wait", never no hint.
const MaxWait = MaxSeconds * time.Second

// RetryAfter parses a Retry-After value (RFC 9110 section 10.2.3):
// delay-seconds, capped at MaxSeconds, or an HTTP-date measured from now
// (0 if past). ok is false when v is empty or malformed.
func RetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if c := v[0]; c >= '0' && c <= '9' {
		var secs int64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				return retryAfterDate(v, now)
			}
			if secs < MaxSeconds {
				secs = secs*10 + int64(c-'0')
			}
		}
		return time.Duration(min(secs, MaxSeconds)) * time.Second, true
	}
	return retryAfterDate(v, now)
}

func retryAfterDate(v string, now time.Time) (time.Duration, bool) {
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return until(t, now), true
}

// until is how long from now until t: 0 if past, at most MaxWait.
func until(t, now time.Time) time.Duration {
	return min(max(t.Sub(now), 0), MaxWait)
}

// Millis parses a non-negative count of milliseconds, with a fraction
// and an exponent allowed; one too large to represent is MaxWait.
func Millis(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if !decimal.MatchString(v) {
		return 0, false
	}
	ms, err := strconv.ParseFloat(v, 64)
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || ms < 0 || math.IsNaN(ms) {
		return 0, false
	}
	if ms >= float64(MaxWait/time.Millisecond) {
		return MaxWait, true
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}

// Zero reports whether a remaining count is 0.
func Zero(v string) bool {
	v = strings.TrimSpace(v)
	return v != "" && strings.Trim(v, "0") == ""
}

// count parses a non-negative whole number, saturating at 2^40 (a value
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

// seconds parses a non-negative count of seconds, saturating at MaxWait.
func seconds(v string) (time.Duration, bool) {
	n, ok := count(v)
	if !ok {
		return 0, false
	}
	return time.Duration(min(n, MaxSeconds)) * time.Second, true
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
		return until(time.UnixMilli(n), now), true
	}
	if (n >= 1e9 || n >= now.Unix()-24*60*60) && n < 1e12 {
		return until(time.Unix(n, 0), now), true
	}
	return time.Duration(min(n, MaxSeconds)) * time.Second, true
}

// goDuration parses a Go-style duration ("6m0s", "20ms"); one too large to
// represent ("9999999h") is MaxWait.
func goDuration(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	d, err := time.ParseDuration(v)
	switch {
	case err == nil && d >= 0:
		return min(d, MaxWait), true
	case err != nil && durationSyntax.MatchString(v):
		return MaxWait, true // well formed: too large for a time.Duration
	}
	return 0, false
}

// rfc3339 parses an RFC 3339 time as a wait from now.
func rfc3339(v string, now time.Time) (time.Duration, bool) {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return 0, false
	}
	return until(t, now), true
}

// decimal is the one grammar of a millisecond hint: digits, a fraction,
// an exponent (1e15, 1.5E3), no sign, no inf, no hex, no _.
var decimal = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

var durationSyntax = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$`)
