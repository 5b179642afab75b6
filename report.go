// This file reports what the retry loop does: the retryhttp_* metrics
// (through metrics.go), the log records and the attempt hook
// (WithAttemptHook), all with one vocabulary: an attempt's outcome
// ("503", "reset") and a give-up's reason (GiveUpReason, in errors.go).
// The hook is a function called around each attempt, so that tracing can
// give every attempt a span of its own, parented and propagated, without
// a dependency here; the OpenTelemetry integration (the otelretry module)
// is built on it.

package retryhttp

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// An event is how one attempt's fate, or the request's, is reported:
// once, to the attempt hook, the metrics and the logs alike.
type event struct {
	kind    eventKind
	attempt int          // the attempt it is about; 0 for a refusal before any
	r       result       // the attempt's result, as the hook is told it
	reason  GiveUpReason // evGiveUp: why the failure is not retried
	delay   time.Duration
	end     time.Time // when the attempt's fate was decided; zero: now
	err     error     // evEnd: the caller's context ended the request
}

type eventKind uint8

const (
	evEnd    eventKind = iota // the request ends with the attempt (or its context)
	evRetry                   // the attempt is retried, after delay: the retry goes now
	evGiveUp                  // a failure worth retrying is not retried: reason
)

// report reports e: the attempt hook's end of the attempt, a retry's or a
// give-up's metrics and log record.
func (k *call) report(e *event) {
	if k.hookEnd != nil {
		k.endAttempt(e)
	}
	c := k.c
	switch e.kind {
	case evRetry:
		if c.metrics != nil {
			c.metrics.retry(e.r.outcome, c.level, e.delay)
		}
		if c.logger != nil {
			c.logger.LogAttrs(k.ctx, slog.LevelInfo, "retryhttp: retrying", k.logAttrs(e.attempt, e.delay, e.r.outcome, "")...)
		}
	case evGiveUp:
		c.metrics.giveUp(e.reason, c.level)
		k.failedAgain()
		if c.logger != nil {
			level := slog.LevelWarn
			if k.owned {
				level = slog.LevelInfo // the layer above owns the outcome, and says so once (layered.go)
			}
			c.logger.LogAttrs(k.ctx, level, "retryhttp: giving up", k.logAttrs(e.attempt, e.delay, e.r.outcome, e.reason)...)
		}
	}
}

// refusal is the error of a request that admission refused before its
// first attempt: the wait's, if it ended in one, else ErrCircuitOpen
// (FailFast) or errRefused (a pacer).
func refusal(reason GiveUpReason, err error) error {
	switch {
	case err != nil:
		return err
	case reason == GiveUpCircuitOpen:
		return ErrCircuitOpen
	}
	return errRefused
}

// endAttempt tells the attempt hook how the attempt in flight ended, once:
// report calls it while there is one to tell.
func (k *call) endAttempt(e *event) {
	end := k.hookEnd
	k.hookEnd = nil
	a := AttemptEnd{Retried: e.kind == evRetry, GiveUp: e.reason, End: e.end}
	if a.Retried {
		a.NextDelay = e.delay
	}
	if a.End.IsZero() {
		a.End = time.Now()
	}
	a.Response, a.Err, a.Outcome, a.Retryable = e.r.resp, e.r.err, e.r.outcome.String(), e.r.retryable
	end(a)
}

// logAttrs are the attributes of a log record: the Transport's name, the
// method, the host and, only if WithLogRoute says what, the route. They
// never include a header value, the URL path (where some APIs put their
// secrets: a webhook's token, a bot's key) or the query string.
func (k *call) logAttrs(attempt int, delay time.Duration, o outcomeID, reason GiveUpReason) []slog.Attr {
	method := k.req.Method
	if method == "" {
		method = http.MethodGet
	}
	attrs := make([]slog.Attr, 0, 13)
	attrs = append(attrs, slog.String("name", k.c.displayName()))
	if k.c.dependency != "" {
		attrs = append(attrs, slog.String("dependency", k.c.dependency))
	}
	if k.c.operation != "" {
		attrs = append(attrs, slog.String("operation", k.c.operation))
	}
	attrs = append(attrs,
		slog.String("method", method),
		slog.String("host", k.req.URL.Host))
	if k.c.logRoute != nil {
		attrs = append(attrs, slog.String("route", k.c.logRoute(k.req)))
	}
	attrs = append(attrs,
		slog.Int("attempt", attempt),
		slog.Int("max_attempts", k.c.maxAttempts),
		slog.Int64("delay_ms", delay.Milliseconds()),
		slog.String("outcome", o.String()))
	if reason != "" {
		attrs = append(attrs, slog.String("reason", string(reason)))
	}
	if k.c.level != 0 {
		attrs = append(attrs, slog.String("criticality", levelText(k.c.level)))
	}
	return attrs
}

// breakerChanged reports a breaker transition: metrics, a log record, the
// user's callback; no admission lock is held (the gate's notify).
func (c *config) breakerChanged(ctx context.Context, host string, open bool, score int) {
	c.metrics.breakerState(open)
	if c.logger != nil {
		level, msg := slog.LevelInfo, "retryhttp: breaker closed"
		if open {
			level, msg = slog.LevelWarn, "retryhttp: breaker open"
		}
		c.logger.LogAttrs(ctx, level, msg, slog.String("name", c.displayName()),
			slog.String("host", host), slog.Int("score", score))
	}
	if f := c.breaker.OnStateChange; f != nil {
		f(host, open)
	}
}

// AttemptStart describes an attempt about to be sent.
type AttemptStart struct {
	Request     *http.Request // the caller's request: read it, do not keep or modify it
	Header      http.Header   // the attempt's own header: the hook may add to it (trace context)
	Attempt     int           // 1 for the first
	MaxAttempts int
	Delay       time.Duration // the wait before this attempt, 0 for the first
	Hedge       bool          // a hedged copy of the first attempt (WithHedging)
	Name        string        // the Transport's name (WithName), "default" if it has none
	Criticality Criticality   // the request's: Critical, Sheddable or "" (WithCriticality)
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
