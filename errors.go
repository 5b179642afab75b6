// This file holds the vocabulary of endings: why a request that was worth
// retrying was not retried (GiveUpReason), and the errors RoundTrip
// returns, and which of them a request that gave up ends with. What an
// attempt ended with ("503", "reset") is its outcome, in status.go.

package retryhttp

import (
	"errors"
	"fmt"
	"time"
)

// GiveUpReason says why a failure worth retrying was not retried. It is the
// Reason of an [Error], the "reason" of the give-up log record and the
// reason label of retryhttp_giveups_total.
type GiveUpReason string

// The reasons for giving up, in the order in which the retry loop checks
// them (see decide in decide.go, then admission in internal/admission).
const (
	GiveUpUnsafeMethod GiveUpReason = "unsafe_method" // a non-idempotent request without a key reached the server
	GiveUpBody         GiveUpReason = "body"          // the body is too long to replay, GetBody failed, or the last body was not closed
	GiveUpAttempts     GiveUpReason = "attempts"      // WithMaxAttempts reached
	GiveUpRetryAfter   GiveUpReason = "retry_after"   // Retry-After asks for more than WithMaxRetryAfter
	GiveUpDeadline     GiveUpReason = "deadline"      // the wait would end past the context deadline
	GiveUpMaxElapsed   GiveUpReason = "max_elapsed"   // the wait would end past WithMaxElapsed
	GiveUpBudget       GiveUpReason = "budget"        // the host's retry budget is spent
	GiveUpBreaker      GiveUpReason = "breaker"       // the retry was held until its limit, and the host failed since
	GiveUpCircuitOpen  GiveUpReason = "circuit_open"  // BreakerConfig.FailFast: the host's breaker is open
	GiveUpThrottled    GiveUpReason = "throttled"     // WithThrottle refused the first attempt
	GiveUpRate         GiveUpReason = "rate"          // WithRateLimit: the attempt's turn would come past its deadline
	GiveUpQuota        GiveUpReason = "quota"         // WithQuotaPacing: the wait for the quota would be too long
	GiveUpLimit        GiveUpReason = "limit"         // WithConcurrencyLimit: no slot within the deadline, or its queue is full
)

// giveUpReasons lists every reason, for the metrics' series.
var giveUpReasons = [...]GiveUpReason{GiveUpUnsafeMethod, GiveUpBody, GiveUpAttempts,
	GiveUpRetryAfter, GiveUpDeadline, GiveUpMaxElapsed, GiveUpBudget, GiveUpBreaker, GiveUpCircuitOpen,
	GiveUpThrottled, GiveUpRate, GiveUpQuota, GiveUpLimit}

// phrases say each reason in words, for Error.Error.
var phrases = map[GiveUpReason]string{
	GiveUpUnsafeMethod: "the request is not idempotent and has no idempotency key",
	GiveUpBody:         "the request body cannot be sent again",
	GiveUpAttempts:     "no attempts left",
	GiveUpRetryAfter:   "Retry-After asks for a longer wait than allowed",
	GiveUpDeadline:     "the next wait would pass the context deadline",
	GiveUpMaxElapsed:   "the next wait would pass the request's time limit",
	GiveUpBudget:       "the host's retry budget is spent",
	GiveUpBreaker:      "the retry was held by the breaker until its time ran out",
	GiveUpCircuitOpen:  "the host's circuit is open",
	GiveUpThrottled:    "the throttle refused it, as the host refuses many",
	GiveUpRate:         "the rate limit would not give it a turn in time",
	GiveUpQuota:        "the host's quota would not allow it in time",
	GiveUpLimit:        "no slot of the concurrency limit came free in time",
}

// phrase says the reason in words, for Error's text.
func (r GiveUpReason) phrase() string {
	if p, ok := phrases[r]; ok {
		return p
	}
	return string(r)
}

// Error is returned by RoundTrip when a request ends without a response.
// It says how many attempts were made and unwraps to the last attempt's
// error, so errors.Is and errors.As reach the cause.
type Error struct {
	Attempts int          // attempts sent; 0 if none was
	Reason   GiveUpReason // why a retryable error was not retried, or "" if it was not retryable
	Err      error
	// Fallback is the dependency's fallback, from its policy (nil if it
	// has none): for the caller to serve, whatever ended the request, its
	// own deadline included.
	Fallback *Fallback

	above bool // GiveUpAttempts because a layer above owns the schedule
}

func (e *Error) Error() string {
	s := "s"
	if e.Attempts == 1 {
		s = ""
	}
	if e.above {
		return fmt.Sprintf("retryhttp: gave up after %d attempt%s, a layer above retries this request and owns its schedule: %v", e.Attempts, s, e.Err)
	}
	if e.Reason != "" {
		return fmt.Sprintf("retryhttp: gave up after %d attempt%s, %s: %v", e.Attempts, s, e.Reason.phrase(), e.Err)
	}
	return fmt.Sprintf("retryhttp: %d attempt%s: %v", e.Attempts, s, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Timeout reports whether the request ended on a timeout: the context's
// deadline, or per-attempt timeouts. It keeps (*url.Error).Timeout,
// os.IsTimeout and net.Error checks true, as they are with a bare
// *http.Transport.
func (e *Error) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// ErrAttemptTimeout is what an attempt that outlived WithPerAttemptTimeout
// ends with; errors.Is finds it in the error RoundTrip returns.
var ErrAttemptTimeout = errors.New("retryhttp: attempt timed out")

// ErrBreakerHold is what a request whose last retry was held too long by
// the breaker ends with when it has no response to return.
var ErrBreakerHold = errors.New("retryhttp: retry held by the breaker until its time ran out")

// ErrCircuitOpen is what a request ends with, under BreakerConfig.FailFast,
// when its host's breaker is open: nothing was sent, so that the caller can
// serve a fallback at once.
var ErrCircuitOpen = errors.New("retryhttp: circuit open")

var errLengthMismatch = errors.New("retryhttp: the request body is not the length it declares")

var errNilResponse = errors.New("retryhttp: base RoundTripper returned a nil response and a nil error")

type attemptTimeoutError struct {
	after time.Duration
	err   error // what the base returned when its context was cut
}

func (e *attemptTimeoutError) Error() string {
	return fmt.Sprintf("retryhttp: attempt timed out after %v", e.after)
}
func (e *attemptTimeoutError) Is(target error) bool { return target == ErrAttemptTimeout }
func (e *attemptTimeoutError) Timeout() bool        { return true }

// Temporary makes an attempt timeout a net.Error, which *Error, without
// it, wraps.
func (e *attemptTimeoutError) Temporary() bool { return true }

// errRefused is what a request that a pacer refused before its first
// attempt ends with, in an *Error whose Reason says which pacer.
var errRefused = errors.New("retryhttp: refused before sending, to spare the host")

// gaveUpWith is the error a retry that admission gave up for reason ends
// with: the breaker's, FailFast's or a pacer's refusal (none if it has
// the last response).
func gaveUpWith(r *result, reason GiveUpReason) error {
	switch reason {
	case GiveUpBreaker:
		return noResponse(r, ErrBreakerHold)
	case GiveUpCircuitOpen:
		return noResponse(r, ErrCircuitOpen)
	case GiveUpThrottled, GiveUpRate, GiveUpQuota, GiveUpLimit:
		return noResponse(r, errRefused)
	}
	return r.err
}

// noResponse is the error a request that gives up without a response ends
// with: err, and the last attempt's error if it had one.
func noResponse(r *result, err error) error {
	if r.resp != nil {
		return r.err
	}
	if r.err != nil {
		return fmt.Errorf("%w (last attempt: %w)", err, r.err)
	}
	return err
}
