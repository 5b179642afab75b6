// This file holds what a Transport's options set in admission that is
// not a controller's own: its reasons, and the breaker's settings.

package admission

import "time"

// Why admission did not let an attempt go, spelt as the public
// GiveUpReason of the same name (a string, which the Transport takes as
// its GiveUpReason: one vocabulary, one type; reasons_test.go holds each
// to one of the root's).
const (
	reasonMaxElapsed  = "max_elapsed"  // a hold ended past WithMaxElapsed
	reasonBudget      = "budget"       // the host's retry budget is spent
	reasonBreaker     = "breaker"      // held until its limit, and the host failed since
	reasonCircuitOpen = "circuit_open" // FailFast: the host's breaker is open
	reasonThrottled   = "throttled"    // the throttle refused a first attempt
	reasonRate        = "rate"         // the static rate: the token would come too late
	reasonQuota       = "quota"        // quota pacing: the wait for the reset would be too long
	reasonLimit       = "limit"        // the concurrency limit: no slot within the deadline, or its queue is full
	reasonDeadline    = "deadline"     // the context's deadline came while a pacer made a retry wait
)

// Breaker is the retry breaker's settings, resolved: the public
// BreakerConfig without its callback (Settings.Notify), every default
// filled in.
type Breaker struct {
	Threshold int
	// ProbeBackoff spaces probes: the public Backoff.
	ProbeBackoff interface {
		Delay(n int, prev time.Duration) time.Duration
	}
	ProbeTimeout time.Duration
	MaxHold      time.Duration
	FailFast     bool
	// Schedule is how long after its request's first failure a held
	// retry may be held at most: the backoff's schedule.
	Schedule time.Duration
}
