// This file holds the options of the retry loop, the requests and the
// observability; the Option types are in config.go, admission's options
// in overload.go, hedging's in hedge.go, and what a policy document says
// in policy.go.

package retryhttp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
)

// WithMaxAttempts sets how many attempts a request may take in all, the
// first included. The default is 4; 1 means never retry. n < 1 is invalid.
func WithMaxAttempts(n int) RequestOption {
	return requestOption("WithMaxAttempts", func(c *config) error {
		if n < 1 {
			return optErr(fmt.Sprintf("WithMaxAttempts(%d)", n), "attempts must be at least 1")
		}
		c.maxAttempts = n
		return nil
	})
}

// WithBackoff sets how long to wait before each retry. The default is
// FullJitter(200*time.Millisecond, 10*time.Second). A Retry-After header
// can stretch a wait, and a context deadline cuts retries short.
func WithBackoff(b Backoff) RequestOption {
	return requestOption("WithBackoff", func(c *config) error {
		if isNil(b) {
			return optErr(fmt.Sprintf("WithBackoff(%T(nil))", b), "a Backoff is required")
		}
		c.backoff = b
		return nil
	})
}

// WithRetryableStatuses replaces the set of status codes that are retried.
// The default is 408, 429 and every 5xx except 501, 505, 506, 508, 510
// and 511; 409 only for a request with an idempotency key. With this
// option exactly the listed codes are retried (409 included, if listed);
// with no codes, no status is retried, only transport errors. Only error
// statuses (400..999) are valid.
func WithRetryableStatuses(codes ...int) RequestOption {
	return requestOption("WithRetryableStatuses", func(c *config) error {
		var s statusSet
		for _, code := range codes {
			if code < 400 || code > 999 {
				return optErr("WithRetryableStatuses", "status code %d is not an error status (400..999): it would be retried when it succeeds", code)
			}
			s.add(code)
		}
		c.statuses, c.customStatuses = s, true
		return nil
	})
}

// WithUnprocessedStatuses declares that the host answers these statuses
// (typically 429) only to requests it did not process: such an answer is
// retried whatever the request's method or declaration, its Retry-After
// honoured, and a POST is sent again with the same body; every other rule
// stands (a POST's 500 is not retried). Only error statuses (400..999)
// are valid; the default is none. docs/retries.md has an example.
func WithUnprocessedStatuses(codes ...int) RequestOption {
	return requestOption("WithUnprocessedStatuses", func(c *config) error {
		var s statusSet
		for _, code := range codes {
			if code < 400 || code > 999 {
				return optErr("WithUnprocessedStatuses", "status code %d is not an error status (400..999)", code)
			}
			s.add(code)
		}
		c.unprocessed = s
		return nil
	})
}

// WithNonRetryableStatuses removes codes from the statuses retried (the
// defaults, or those of an earlier WithRetryableStatuses), keeping the
// keyed-409 rule unless 409 is one of them: WithNonRetryableStatuses(500)
// retries every default status but 500. A 429, 502, 503 or 504 that is
// not retried still counts as the host's failure for the breaker. It is a
// policy's retry.non_retryable_status. Codes outside 100..999 are invalid.
// It may be given for one request (WithRequestOptions).
func WithNonRetryableStatuses(codes ...int) RequestOption {
	return requestOption("WithNonRetryableStatuses", func(c *config) error {
		var s statusSet
		for _, code := range codes {
			if code < 100 || code > 999 {
				return optErr("WithNonRetryableStatuses", "status code %d is outside 100..999", code)
			}
		}
		for code := 100; code < 1000; code++ {
			if c.statuses.has(code) && !slices.Contains(codes, code) {
				s.add(code)
			}
		}
		c.statuses = s
		if slices.Contains(codes, statusConflict) {
			c.customStatuses = true
		}
		return nil
	})
}

// WithPerAttemptTimeout bounds each attempt's wait for response headers. An
// attempt that times out is retried like a transport error. The timeout
// stops once the headers arrive: the body of the response that is returned
// is read under the caller's context alone and is never cut off by it. The
// default, 0, sets no per-attempt timeout. d < 0 is invalid.
func WithPerAttemptTimeout(d time.Duration) RequestOption {
	return requestOption("WithPerAttemptTimeout", func(c *config) error {
		if d < 0 {
			return optErr(fmt.Sprintf("WithPerAttemptTimeout(%v)", d), "timeout is negative")
		}
		c.perAttemptTimeout = d
		return nil
	})
}

// WithMaxElapsed bounds a request's total time: no wait starts that would
// end more than d after its first attempt began. The last response (or
// error) is then returned at once, with give-up reason "max_elapsed", as
// for a context deadline; unlike http.Client.Timeout, it never cuts the
// body of the response that is returned. The default, 0, sets no limit;
// d < 0 is invalid. It may be given for one request (WithRequestOptions).
func WithMaxElapsed(d time.Duration) RequestOption {
	return requestOption("WithMaxElapsed", func(c *config) error {
		if d < 0 {
			return optErr(fmt.Sprintf("WithMaxElapsed(%v)", d), "duration is negative")
		}
		c.maxElapsed = d
		return nil
	})
}

// WithMaxRetryAfter sets the longest Retry-After that is honoured. A
// retryable response asking for a longer wait is returned at once, without
// waiting. The default is 30s. d < 0 is invalid.
func WithMaxRetryAfter(d time.Duration) RequestOption {
	return requestOption("WithMaxRetryAfter", func(c *config) error {
		if d < 0 {
			return optErr(fmt.Sprintf("WithMaxRetryAfter(%v)", d), "duration is negative")
		}
		c.maxRetryAfter = d
		return nil
	})
}

// WithBodyBufferLimit sets how many bytes of a request body that has no
// GetBody are buffered so that it can be sent again. A longer body is sent
// once, whole and unchanged, and that request is not retried. A body with
// GetBody is never buffered. The default is 1 MiB; 0 buffers nothing, so
// that only requests without a body or with GetBody are retried. n < 0 is
// invalid.
func WithBodyBufferLimit(n int64) Option {
	return option("WithBodyBufferLimit", func(c *config) error {
		if n < 0 {
			return optErr(fmt.Sprintf("WithBodyBufferLimit(%d)", n), "limit is negative")
		}
		c.bodyLimit = n
		return nil
	})
}

// WithIdempotencyKeys adds an Idempotency-Key (from NewUUIDKey, or
// WithKeyGenerator) to requests with one of the given methods (POST if
// none; any case) that carry no key: one key per call of RoundTrip, sent
// on every attempt, so that the request is retried. Use it only for a
// server that deduplicates keys (docs/retries.md); declare requests that
// are safe to repeat anyway with Idempotent or WithIdempotentIf. A method
// that is not a token is invalid. The default adds no keys.
func WithIdempotencyKeys(methods ...string) RequestOption {
	return requestOption("WithIdempotencyKeys", func(c *config) error {
		given := methods // not assigned to: the option may be applied from several goroutines
		if len(given) == 0 {
			given = []string{http.MethodPost}
		}
		var ms methodSet
		for _, m := range given {
			if !validHeaderName(m) { // a method is a token
				return optErr(fmt.Sprintf("WithIdempotencyKeys(%q)", m), "not a method name")
			}
			ms = append(ms, strings.ToUpper(m)) // "post" is meant as POST
		}
		c.keyMethods = ms
		return nil
	})
}

// WithDialTimeout sets the dial timeout of the base transport that New
// builds when it is given a nil base (cleanhttp's pooled transport, whose
// own is 30s). With a base of the caller's, New refuses it: set the
// timeout on that base's Dialer instead. d < 0 is invalid.
func WithDialTimeout(d time.Duration) Option {
	return option("WithDialTimeout", func(c *config) error {
		if d < 0 {
			return optErr(fmt.Sprintf("WithDialTimeout(%v)", d), "timeout is negative")
		}
		c.dialTimeout = d
		return nil
	})
}

// WithKeyGenerator sets the function that makes idempotency keys for
// WithIdempotencyKeys: for the IETF draft's quoted form,
// func() string { return strconv.Quote(retryhttp.NewUUIDKey()) }. The
// default is NewUUIDKey. It must be safe for concurrent use.
func WithKeyGenerator(gen func() string) Option {
	return option("WithKeyGenerator", func(c *config) error {
		if gen == nil {
			return optErr("WithKeyGenerator(nil)", "a generator is required")
		}
		c.keyGen = gen
		return nil
	})
}

// WithBudget sets the retry Budget. The default is a Budget of its own for
// each Transport, NewBudget(0.1, 10); pass one Budget to several
// Transports to make them share it. A nil b is invalid: WithoutBudget
// turns the budget off.
func WithBudget(b *Budget) Option {
	return option("WithBudget", func(c *config) error {
		if b == nil {
			return optErr("WithBudget(nil)", "a Budget is required (WithoutBudget turns the budget off)")
		}
		c.budget = b
		return nil
	})
}

// WithoutBudget turns the retry budget off: retries are limited by the
// attempts, the deadline and the breaker alone. A feature that is on by
// default (the budget, the retry breaker) is turned off by its Without
// option, or by "disabled": true in a policy.
func WithoutBudget() Option {
	return option("WithoutBudget", func(c *config) error {
		c.budget = nil
		return nil
	})
}

// WithLogger makes the Transport log each retry sent (Info), each
// give-up (Warn), each breaker change and each retrying layer above it,
// with the Transport's name, method, host, attempt, delay, outcome and
// reason (docs/observability.md). Header values, URL paths and queries,
// which may carry secrets, are never logged; WithLogRoute adds what you
// choose. The default logs nothing.
func WithLogger(l *slog.Logger) Option {
	return option("WithLogger", func(c *config) error {
		c.logger = l
		return nil
	})
}

// WithLogRoute adds a "route" attribute to the log records of a request:
// what route returns for it, such as the route template that served it
// ("/users/{id}"), or its path if the paths of this dependency carry no
// secrets. It is called only when a record is written. The default logs
// no route.
func WithLogRoute(route func(*http.Request) string) Option {
	return option("WithLogRoute", func(c *config) error {
		if route == nil {
			return optErr("WithLogRoute(nil)", "a function is required")
		}
		c.logRoute = route
		return nil
	})
}

// WithName names the Transport in metrics (the "name" label), so that
// several Transports sharing one Metrics can be told apart. The default is
// "default".
func WithName(name string) Option {
	return option("WithName", func(c *config) error {
		c.name = name
		return nil
	})
}

// WithAttemptHeader makes every attempt carry the request header name
// with value, in which {attempt} is the attempt's number (1 for the
// first), {retry} the retries before it (0 for the first) and {max} the
// attempts allowed: Envoy's convention is ("X-Envoy-Attempt-Count",
// "{attempt}"), Stainless' ("X-Stainless-Retry-Count", "{retry}"), AWS's
// ("Amz-Sdk-Request", "attempt={attempt}; max={max}"). Each attempt then
// copies the header map. An invalid name, or a value with another
// placeholder or a control character, is invalid. The default adds none.
func WithAttemptHeader(name, value string) Option {
	return option("WithAttemptHeader", func(c *config) error {
		what := fmt.Sprintf("WithAttemptHeader(%q, %q)", name, value)
		if !validHeaderName(name) {
			return optErr(what, "not a valid header name")
		}
		if err := checkAttemptValue(value); err != nil {
			return optErr(what, "%v", err)
		}
		c.attemptHeader, c.attemptValue = http.CanonicalHeaderKey(name), value
		return nil
	})
}

// attemptPlaceholders are what an attempt header's value may say.
var attemptPlaceholders = []string{"{attempt}", "{retry}", "{max}"}

// checkAttemptValue reports what is wrong with an attempt header's value.
func checkAttemptValue(v string) error {
	rest := v
	for _, p := range attemptPlaceholders {
		rest = strings.ReplaceAll(rest, p, "")
	}
	switch {
	case strings.ContainsAny(rest, "{}"):
		return errors.New("a placeholder other than {attempt}, {retry} and {max}")
	case !validHeaderValue(rest):
		return errors.New("not a valid header value")
	case v == rest:
		return errors.New("no placeholder: the value would not change from one attempt to the next")
	}
	return nil
}

// validHeaderValue reports whether v may be a header field's value: no
// control character but tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// WithDeadlineHeader makes every attempt carry the request header name
// with the whole milliseconds left of the smaller of the context's
// deadline and WithPerAttemptTimeout, computed afresh for each attempt, as
// Envoy's x-envoy-expected-rq-timeout-ms does, so that the server can give
// up on work the caller will not wait for. An attempt with neither bound
// carries none. An invalid name is invalid. The default adds none.
func WithDeadlineHeader(name string) Option {
	return option("WithDeadlineHeader", func(c *config) error {
		if !validHeaderName(name) {
			return optErr(fmt.Sprintf("WithDeadlineHeader(%q)", name), "not a valid header name")
		}
		c.deadlineHeader = http.CanonicalHeaderKey(name)
		return nil
	})
}

// WithAddressRotation sends each attempt of a request to an address of its
// host not yet tried by that request, when the name resolves to several:
// otherwise a retry may reuse the connection, or reach the backend, that
// just failed. First attempts take the addresses in turn, each address
// with its own pooled connections, HTTP/2 included. It needs a nil base or
// an *http.Transport, copied per address (docs/retries.md). The default
// sends every attempt as the base does.
func WithAddressRotation() Option {
	return option("WithAddressRotation", func(c *config) error {
		c.rotate = true
		return nil
	})
}
