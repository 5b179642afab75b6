// This file holds the attempt hook (WithAttemptHook): a function called
// around each attempt, so that tracing can give every attempt a span of
// its own, parented and propagated, without a dependency here. The
// OpenTelemetry integration (the otelretry module) is built on it.

package retryhttp

import (
	"context"
	"net/http"
	"time"
)

// AttemptStart describes an attempt about to be sent.
type AttemptStart struct {
	Request     *http.Request // the caller's request: read it, do not keep or modify it
	Header      http.Header   // the attempt's own header: the hook may add to it (trace context)
	Attempt     int           // 1 for the first
	MaxAttempts int
	Delay       time.Duration // the wait before this attempt, 0 for the first
	Hedge       bool          // a hedged copy of the first attempt (WithHedging)
	Name        string        // the Transport's name (WithName), "default" if it has none
}

// AttemptEnd describes how an attempt ended, and what came of it. It is
// reported once that is known: at once for an attempt that ends the
// request, and for one that is retried, after the retry's wait (a hold
// included), as the retry goes. A retry that gives up in its wait (held by
// the breaker to its limit) is reported with its GiveUp reason, not as
// Retried; one whose caller's context ended in the wait, with neither.
type AttemptEnd struct {
	Response  *http.Response // nil if the attempt ended in an error (or its response was let go during a wait); do not read its body
	Err       error
	Outcome   string        // the status code ("503") or the error class ("reset", ...)
	Retryable bool          // the outcome was worth retrying
	NextDelay time.Duration // the wait before the next attempt, as it was, if Retried
	Retried   bool          // another attempt follows: it starts next
	GiveUp    GiveUpReason  // why a retryable outcome was not retried, if it was not
	End       time.Time     // when the attempt ended (its answer or error came): a span ends here, not when the hook is called
}

// WithAttemptHook sets a function called before each attempt with its
// start; the context it returns is the attempt's (a span in it parents
// what the base does), and the function it returns, if not nil, is called
// once with the attempt's end. Both must return quickly. They run on the
// goroutine of RoundTrip, but for a hedged attempt's copies, which run
// concurrently on their own. The default is none, and costs nothing.
func WithAttemptHook(h func(ctx context.Context, a AttemptStart) (context.Context, func(AttemptEnd))) Option {
	return option("WithAttemptHook", func(c *config) error {
		c.attemptHook = h
		return nil
	})
}

// endAttempt reports the end of the attempt in flight to the hook, once.
func (k *call) endAttempt(r *result, e AttemptEnd) {
	if k.hookEnd == nil {
		return
	}
	end := k.hookEnd
	k.hookEnd = nil
	if e.End.IsZero() {
		e.End = time.Now()
	}
	e.Response, e.Err, e.Outcome, e.Retryable = r.resp, r.err, r.outcome.String(), r.retryable
	end(e)
}
