// This file parses the Retry-After response header (RFC 9110 section
// 10.2.3). How the parsed value bounds a wait is decided in decide.go.

package retryhttp

import (
	"net/http"
	"strings"
	"time"
)

// maxRetryAfterSeconds bounds delay-seconds so that converting them to a
// time.Duration cannot overflow. It is far beyond any WithMaxRetryAfter, so
// a larger value still means "longer than we will wait".
const maxRetryAfterSeconds = 1 << 32

// ParseRetryAfter parses the value of a Retry-After header, in either of its
// two forms: delay-seconds ("120") or an HTTP-date in any form that
// http.ParseTime accepts ("Wed, 21 Oct 2015 07:28:00 GMT"). A date is
// measured from now; a date in the past gives 0. The result is never
// negative, and delay-seconds are capped at 2^32 seconds.
//
// ok is false when v is empty or malformed (a negative number, a fraction,
// an unknown date form): the header is then to be ignored.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if c := v[0]; c >= '0' && c <= '9' {
		var secs int64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				return parseRetryAfterDate(v, now)
			}
			if secs < maxRetryAfterSeconds {
				secs = secs*10 + int64(c-'0')
			}
		}
		return time.Duration(min(secs, maxRetryAfterSeconds)) * time.Second, true
	}
	return parseRetryAfterDate(v, now)
}

func parseRetryAfterDate(v string, now time.Time) (time.Duration, bool) {
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		return 0, true
	}
	return min(d, maxRetryAfterSeconds*time.Second), true
}
