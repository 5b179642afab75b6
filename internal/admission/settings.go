// This file holds what a Transport's options set in admission that is
// not a controller's own: its reasons, and the breaker's settings.

package admission

import "time"

// A Reason is why admission did not let an attempt go: the public
// GiveUpReason of the same name.
type Reason string

const (
	reasonMaxElapsed  Reason = "max_elapsed"  // a hold ended past WithMaxElapsed
	reasonBudget      Reason = "budget"       // the host's retry budget is spent
	reasonBreaker     Reason = "breaker"      // held until its limit, and the host failed since
	reasonCircuitOpen Reason = "circuit_open" // FailFast: the host's breaker is open
	reasonThrottled   Reason = "throttled"    // the throttle refused a first attempt
	reasonRate        Reason = "rate"         // the static rate: the token would come too late
	reasonQuota       Reason = "quota"        // quota pacing: the wait for the reset would be too long
	reasonLimit       Reason = "limit"        // the concurrency limit: no slot within the deadline, or its queue is full
	reasonDeadline    Reason = "deadline"     // the context's deadline came while a pacer made a retry wait
)

// Reasons are admission's reasons, every one.
var Reasons = [...]Reason{reasonMaxElapsed, reasonBudget, reasonBreaker, reasonCircuitOpen, reasonThrottled, reasonRate, reasonQuota, reasonLimit, reasonDeadline}

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
