// This file holds the retry decision: the facts gathered about an
// attempt that failed in a way worth retrying, and whether the policy
// lets the request be sent again, and after how long. The checks form one ordered ladder, so that each
// give-up has exactly one reason; the loop in transport.go acts on the
// verdict.

package retryhttp

import (
	"time"

	"github.com/retryhttp/retryhttp/internal/ratelimit"
)

// facts are what the decision needs to know about a failed attempt.
type facts struct {
	attempt     int           // the attempt that failed, 1 for the first
	maxAttempts int           // WithMaxAttempts
	replayable  bool          // idempotent method, or an idempotency key
	notSent     bool          // provably not processed (no connection; HTTP/2 refused it)
	bodyOnce    bool          // the body cannot be sent again
	backoff     time.Duration // what the Backoff asks for
	retryAfter  time.Duration // the wait the response asks for (Retry-After or a rate-limit hint), if hasRA
	raSpread    time.Duration // retryAfter, spread upward (spread in retryafter.go)
	hasRA       bool
	server      time.Duration // the wait the server asked for (retryAfter, not below 0), 0 if none: admission's, not the ladder's
	maxRA       time.Duration // WithMaxRetryAfter
	untilDL     time.Duration // time left before the context deadline, if hasDL
	hasDL       bool
	untilME     time.Duration // time left of WithMaxElapsed, if hasME
	hasME       bool
}

// verdict is what decide returns: a reason to give up, or the wait before
// the next attempt.
type verdict struct {
	giveUp GiveUpReason // "" to retry
	delay  time.Duration
}

// decide runs the ladder of checks that need no action. Its last two rungs
// act, and so run in the loop after it, in this order (retry, transport.go): the next
// body is fetched (GiveUpBody if GetBody fails), then the budget is asked
// (GiveUpBudget), so that a body that cannot be had never spends the
// budget, and the budget is spent only on a retry that will be made.
func decide(f facts) verdict {
	delay := max(f.backoff, 0)
	switch {
	case !f.replayable && !f.notSent:
		return verdict{GiveUpUnsafeMethod, 0}
	case f.bodyOnce:
		return verdict{GiveUpBody, 0}
	case f.attempt >= f.maxAttempts:
		return verdict{GiveUpAttempts, 0}
	case f.hasRA && f.retryAfter > f.maxRA:
		return verdict{GiveUpRetryAfter, f.retryAfter}
	}
	if f.hasRA {
		delay = max(delay, f.retryAfter, f.raSpread)
	}
	switch {
	case f.hasDL && delay >= f.untilDL:
		return verdict{GiveUpDeadline, delay}
	case f.hasME && delay > f.untilME:
		return verdict{GiveUpMaxElapsed, delay}
	}
	return verdict{"", delay}
}

// facts gathers what decide needs about attempt n's result.
func (k *call) facts(n int, r *result, prev time.Duration) facts {
	c := k.c
	f := facts{
		attempt: n, maxAttempts: c.maxAttempts,
		replayable: k.replayable || r.declined, notSent: r.notSent,
		bodyOnce: k.body.mode == bodyOnce && c.maxAttempts > 1, // with one attempt, the reason is attempts
		maxRA:    c.maxRetryAfter,
	}
	if k.owned {
		f.maxAttempts = k.maxAttempts() // a layer above's (layered.go)
	}
	if f.replayable || f.notSent {
		f.backoff = c.backoff.Delay(n, prev)
	}
	now := time.Now()
	if r.resp != nil {
		if f.retryAfter, f.hasRA = ratelimit.Wait(r.resp.Header, now); f.hasRA {
			f.raSpread, f.server = spread(f.retryAfter), max(f.retryAfter, 0)
		}
	}
	if dl := k.ctxEnd; !dl.IsZero() {
		f.untilDL, f.hasDL = dl.Sub(now), true
	}
	if me := k.elapsedEnd; !me.IsZero() {
		f.untilME, f.hasME = me.Sub(now), true
	}
	return f
}
