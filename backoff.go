// This file holds the Backoff strategies: how long to wait before each retry.
// The options that choose one are in options.go; the loop that waits is in
// transport.go.

package retryhttp

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// A Backoff computes the wait before a retry.
//
// Delay is called with retry = 1 before the first retry, 2 before the
// second, and so on, and with prev, the delay it returned for the previous
// retry of the same request (0 before the first). A Backoff keeps no state
// of its own between calls, so one Backoff is safely shared by every request
// of every Transport that uses it; per-request state is the prev argument.
// Delay must be safe for concurrent use and must not return a negative
// duration.
type Backoff interface {
	Delay(retry int, prev time.Duration) time.Duration
}

// BackoffFunc adapts a function to the Backoff interface.
type BackoffFunc func(retry int, prev time.Duration) time.Duration

// Delay returns f(retry, prev).
func (f BackoffFunc) Delay(retry int, prev time.Duration) time.Duration { return f(retry, prev) }

// bound returns min(max, base × 2^retry) without overflowing: with the
// defaults, 400ms before the first retry, 800ms before the second, and so
// on up to 10s.
func bound(base, max time.Duration, retry int) time.Duration {
	if retry < 1 {
		retry = 1
	}
	shift := retry
	if base <= 0 {
		return 0
	}
	if shift >= 62 || base > max>>uint(shift) {
		return max
	}
	return base << uint(shift)
}

// uniform returns a duration drawn uniformly from [lo, hi].
func uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	span := int64(hi - lo)
	if span == 1<<63-1 {
		return lo + time.Duration(rand.Int64())
	}
	return lo + time.Duration(rand.Int64N(span+1))
}

// checkBase panics with baseErr's error, for a constructor called in code.
func checkBase(fn string, base, max time.Duration) {
	if err := baseErr(fn, base, max); err != nil {
		panic(err.Error())
	}
}

// baseErr is what is wrong with a backoff's base and max, or nil: the one
// check of the constructors and of a policy's retry section.
func baseErr(fn string, base, max time.Duration) error {
	if base < 0 {
		return fmt.Errorf("retryhttp: %s: base %v is negative", fn, base)
	}
	if max < base {
		return fmt.Errorf("retryhttp: %s: max %v is less than base %v", fn, max, base)
	}
	return nil
}

type fullJitter struct{ base, max time.Duration }

func (b fullJitter) Delay(retry int, _ time.Duration) time.Duration {
	return uniform(0, bound(b.base, b.max, retry))
}

// FullJitter returns the default Backoff: before retry n it waits a duration
// drawn uniformly from [0, min(max, base × 2^n)], so that with the
// defaults (200ms, 10s) the first retry waits 0 to 400ms, the second 0 to
// 800ms, and so on up to 10s. Full jitter spreads
// clients that failed together across the whole interval, so that they do
// not come back in synchronised waves.
//
// It panics if base is negative or max is less than base.
func FullJitter(base, max time.Duration) Backoff {
	checkBase("FullJitter", base, max)
	return fullJitter{base, max}
}

type equalJitter struct{ base, max time.Duration }

func (b equalJitter) Delay(retry int, _ time.Duration) time.Duration {
	hi := bound(b.base, b.max, retry)
	return uniform(hi-hi/2, hi)
}

// EqualJitter returns a Backoff that waits a duration drawn uniformly from
// [bound/2, bound], where bound = min(max, base × 2^n) before retry n.
// It never waits less than half the bound.
//
// It panics if base is negative or max is less than base.
func EqualJitter(base, max time.Duration) Backoff {
	checkBase("EqualJitter", base, max)
	return equalJitter{base, max}
}

type decorrelatedJitter struct{ base, max time.Duration }

func (b decorrelatedJitter) Delay(_ int, prev time.Duration) time.Duration {
	if prev < b.base {
		prev = b.base
	}
	hi := b.max
	if prev <= b.max/3 {
		hi = prev * 3
	}
	d := uniform(b.base, hi)
	return min(d, b.max)
}

// DecorrelatedJitter returns the "decorrelated jitter" Backoff: each wait is
// drawn uniformly from [base, 3 × previous wait] and capped at max, the
// first from [base, 3 × base].
//
// It panics if base is negative or max is less than base.
func DecorrelatedJitter(base, max time.Duration) Backoff {
	checkBase("DecorrelatedJitter", base, max)
	return decorrelatedJitter{base, max}
}

type exponential struct{ base, max time.Duration }

func (b exponential) Delay(retry int, _ time.Duration) time.Duration {
	return bound(b.base, b.max, retry)
}

// Exponential returns a Backoff without jitter: min(max, base × 2^n)
// before retry n. Without jitter, clients that failed together retry
// together; prefer FullJitter unless the caller is the only client.
//
// It panics if base is negative or max is less than base.
func Exponential(base, max time.Duration) Backoff {
	checkBase("Exponential", base, max)
	return exponential{base, max}
}

type constant time.Duration

func (c constant) Delay(int, time.Duration) time.Duration { return time.Duration(c) }

// Constant returns a Backoff that always waits d. Constant(0) retries at
// once, which is useful in tests.
//
// It panics if d is negative.
func Constant(d time.Duration) Backoff {
	if d < 0 {
		panic(fmt.Sprintf("retryhttp: Constant: delay %v is negative", d))
	}
	return constant(d)
}

// upperDelay is the longest wait b can ask for before retry n: the bound
// of the built-in strategies, or a draw of a Backoff of the user's.
func upperDelay(b Backoff, retry int, prev time.Duration) time.Duration {
	switch b := b.(type) {
	case fullJitter:
		return bound(b.base, b.max, retry)
	case equalJitter:
		return bound(b.base, b.max, retry)
	case exponential:
		return bound(b.base, b.max, retry)
	case decorrelatedJitter:
		return b.max
	}
	return max(b.Delay(retry, prev), 0)
}
