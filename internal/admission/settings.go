package admission

import "time"

// A Reason is why admission did not let an attempt go: the public
// GiveUpReason of the same name.
type Reason string

const (
	ReasonMaxElapsed  Reason = "max_elapsed"  // a hold ended past WithMaxElapsed
	ReasonBudget      Reason = "budget"       // the host's retry budget is spent
	ReasonBreaker     Reason = "breaker"      // held until its limit, and the host failed since
	ReasonCircuitOpen Reason = "circuit_open" // FailFast: the host's breaker is open
	ReasonThrottled   Reason = "throttled"    // the throttle refused a first attempt
	ReasonRate        Reason = "rate"         // the static rate: the token would come too late
	ReasonQuota       Reason = "quota"        // quota pacing: the wait for the reset would be too long
	ReasonLimit       Reason = "limit"        // the concurrency limit: no slot within the deadline, or its queue is full
	ReasonDeadline    Reason = "deadline"     // the context's deadline came while a pacer made a retry wait
)

// Reasons are admission's reasons, every one.
var Reasons = [...]Reason{ReasonMaxElapsed, ReasonBudget, ReasonBreaker, ReasonCircuitOpen, ReasonThrottled, ReasonRate, ReasonQuota, ReasonLimit, ReasonDeadline}

// A Delayer spaces probes: the public Backoff.
type Delayer interface {
	Delay(n int, prev time.Duration) time.Duration
}

// Breaker is the retry breaker's settings, resolved: the public
// BreakerConfig without its callback (Settings.Notify), every default
// filled in.
type Breaker struct {
	Threshold    int
	ProbeBackoff Delayer
	ProbeTimeout time.Duration
	MaxHold      time.Duration
	FailFast     bool
	// Schedule is how long after its request's first failure a held
	// retry may be held at most: the backoff's schedule.
	Schedule time.Duration
}
