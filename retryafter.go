// This file holds the server's wait: ParseRetryAfter, the public parser
// of Retry-After (RFC 9110 section 10.2.3), over internal/ratelimit, which
// reads it with every other rate-limit field; and the spread of a wait a
// server asks for. How the wait bounds a retry is decided in decide.go.

package retryhttp

import (
	"math/rand/v2"
	"time"

	"github.com/retryhttp/retryhttp/internal/ratelimit"
)

// maxRetryAfterSeconds bounds delay-seconds so that converting them to a
// time.Duration cannot overflow. It is far beyond any WithMaxRetryAfter, so
// a larger value still means "longer than we will wait".
const maxRetryAfterSeconds = ratelimit.MaxSeconds

// ParseRetryAfter parses the value of a Retry-After header, in either of its
// two forms: delay-seconds ("120") or an HTTP-date in any form that
// http.ParseTime accepts ("Wed, 21 Oct 2015 07:28:00 GMT"). A date is
// measured from now; a date in the past gives 0. The result is never
// negative, and delay-seconds are capped at 2^32 seconds.
//
// ok is false when v is empty or malformed (a negative number, a fraction,
// an unknown date form): the header is then to be ignored.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	return ratelimit.RetryAfter(v, now)
}

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
	if extra <= 0 || d > ratelimit.MaxWait {
		return d
	}
	return d + time.Duration(rand.Int64N(int64(extra)+1))
}
