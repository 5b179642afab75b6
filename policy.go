// This file holds policy as data: the Policy type and the schema it is
// read into, in the shape of the per-dependency template that teams write
// (dependency, operation, semantic_safety, time_budget, retry, budget,
// breaker, hedging, fallback, observability, owner). policyload.go reads
// files of them; policyopts.go turns one into the Options it stands for.

package retryhttp

// A Policy is a retry policy written as data, for one dependency or one
// operation of it: the template that teams write per dependency, in JSON
// (ParsePolicy, LoadPolicies) or YAML (the yamlpolicy module). A field
// left out keeps the option's default; docs/policy.md maps every field to
// the Option it stands for, which checks its value.
//
//	{
//	  "dependency": "party-service",
//	  "operation": "getPartySnapshot",
//	  "semantic_safety": {"idempotent": true, "side_effect": false},
//	  "time_budget": {"caller_deadline_ms": 800, "connect_timeout_ms": 100, "read_timeout_ms": 250},
//	  "retry": {"max_attempts_total": 3, "backoff": "exponential_full_jitter",
//	            "initial_delay_ms": 50, "max_delay_ms": 200,
//	            "retryable_status": [408, 429, 502, 503, 504]},
//	  "budget": {"max_retry_ratio": 0.1},
//	  "fallback": {"type": "partial_response"},
//	  "observability": {"emit_attempt_metric": true, "tag_dependency": true, "trace_attempts": true},
//	  "owner": "case-platform-team"
//	}
//
// The schema is not Go's to build: code that sets options in Go uses the
// options, and code that reads settings at run time reads them as a
// Policy, whose errors name the field. The zero Policy sets nothing.
type Policy struct {
	doc policyDoc
	ops []policyDoc // the dependency's operations, grouped by NewPolicies
}

// policyDoc is one policy as written. Every field that stands for an
// option is a pointer (or a list, nil when left out), so that a value
// written as 0 is the option's 0, and one left out is the default.
// Operation, InteractionType, Criticality, Fallback and Owner change
// nothing in how requests are sent: they are the caller's (a fallback is
// the caller's to serve, when an error matching ErrCircuitOpen comes
// back, say).
type policyDoc struct {
	Dependency string `json:"dependency"`
	Operation  string `json:"operation"`
	// Match says which requests of the dependency this operation's policy
	// applies to, as "METHOD /path/pattern" (path.Match on the URL path):
	// "GET /parties/*". A policy without Match is the dependency's, for
	// every request that no operation matches.
	Match           string `json:"match"`
	InteractionType string `json:"interaction_type"`
	Criticality     string `json:"criticality"`

	SemanticSafety *semanticSafety `json:"semantic_safety"`
	TimeBudget     *timeBudget     `json:"time_budget"`
	Retry          *retrySpec      `json:"retry"`
	Budget         *budgetSpec     `json:"budget"`
	Breaker        *breakerSpec    `json:"breaker"`
	Hedging        *hedgeSpec      `json:"hedging"`
	Overload       *overloadSpec   `json:"overload"`
	Fallback       *fallback       `json:"fallback"`
	Observability  *observability  `json:"observability"`
	Owner          string          `json:"owner"`
}

// semanticSafety says whether the dependency's requests may be repeated.
type semanticSafety struct {
	// Idempotent: true declares every request the policy applies to safe
	// to repeat, whatever its method (WithIdempotentIf). Otherwise, with
	// SideEffect: true, every request is declared unsafe, whatever its
	// method (NotIdempotent); with neither, nothing is declared: the
	// method and an idempotency key decide (in an operation, an explicit
	// false undoes the dependency's declaration).
	Idempotent *bool `json:"idempotent"`
	// SideEffect: false without Idempotent: true is a contradiction (a
	// request without a side effect is idempotent) and is refused.
	SideEffect *bool `json:"side_effect"`
	// IdempotencyKeys is WithIdempotencyKeys' methods: [] keys POST, as
	// WithIdempotencyKeys() does.
	IdempotencyKeys []string `json:"idempotency_keys"`
	// IdempotentRequests declares some requests safe to repeat, as
	// "METHOD /path/pattern" entries: ["POST /*/_search"].
	IdempotentRequests []string `json:"idempotent_requests"`
	// UnprocessedStatus is WithUnprocessedStatuses: the statuses the
	// host answers only to requests it did not process ([429]).
	UnprocessedStatus []int `json:"unprocessed_status"`
}

// timeBudget bounds the time a call may take, in milliseconds.
type timeBudget struct {
	CallerDeadlineMS *int64 `json:"caller_deadline_ms"` // WithMaxElapsed
	ConnectTimeoutMS *int64 `json:"connect_timeout_ms"` // WithDialTimeout
	ReadTimeoutMS    *int64 `json:"read_timeout_ms"`    // WithPerAttemptTimeout
}

// retrySpec says how often and how soon requests are retried.
type retrySpec struct {
	MaxAttemptsTotal *int `json:"max_attempts_total"` // WithMaxAttempts
	// Backoff, InitialDelayMS and MaxDelayMS are WithBackoff: the
	// strategy's name, its base (for constant, its delay) and its cap.
	Backoff            *string `json:"backoff"`
	InitialDelayMS     *int64  `json:"initial_delay_ms"`
	MaxDelayMS         *int64  `json:"max_delay_ms"`
	RetryableStatus    []int   `json:"retryable_status"`        // WithRetryableStatuses
	NonRetryableStatus []int   `json:"non_retryable_status"`    // WithNonRetryableStatuses, applied after RetryableStatus
	MaxRetryAfterMS    *int64  `json:"max_retry_after_ms"`      // WithMaxRetryAfter
	BodyBufferLimit    *int64  `json:"body_buffer_limit_bytes"` // WithBodyBufferLimit
	AddressRotation    *bool   `json:"address_rotation"`        // true: WithAddressRotation
}

// budgetSpec is WithBudget(NewBudget(MaxRetryRatio, MinRetriesPerSecond)),
// a field left out taking NewBudget's default; or WithoutBudget if
// Disabled.
type budgetSpec struct {
	MaxRetryRatio       *float64 `json:"max_retry_ratio"`
	MinRetriesPerSecond *float64 `json:"min_retries_per_second"`
	Disabled            bool     `json:"disabled"`
}

// breakerSpec is WithRetryBreaker(BreakerConfig{...}), or
// WithoutRetryBreaker if Disabled.
type breakerSpec struct {
	Disabled  bool   `json:"disabled"`
	FailFast  bool   `json:"fail_fast"`
	Threshold int    `json:"threshold"`
	MaxHoldMS *int64 `json:"max_hold_ms"`
}

// hedgeSpec is WithHedging(HedgeConfig{...}): a zero field takes its
// default.
type hedgeSpec struct {
	DelayMS    int64   `json:"delay_ms"`
	Percentile float64 `json:"percentile"`
	MaxExtra   int     `json:"max_extra"`
}

// overloadSpec turns on the pacers: WithThrottle(ThrottleRatio),
// WithConcurrencyLimit(ConcurrencyMin, ConcurrencyMax) (a min left out is
// the max: a fixed limit), WithQuotaPacing(QuotaMaxWaitMS, QuotaSpread)
// and WithRateLimit(RatePerSecond, RateBurst) (a burst left out is 1).
type overloadSpec struct {
	ThrottleRatio  *float64 `json:"throttle_ratio"`
	ConcurrencyMin *int     `json:"concurrency_min"`
	ConcurrencyMax *int     `json:"concurrency_max"`
	QuotaMaxWaitMS *int64   `json:"quota_max_wait_ms"`
	QuotaSpread    *bool    `json:"quota_spread"`
	RatePerSecond  *float64 `json:"rate_per_second"`
	RateBurst      *int     `json:"rate_burst"`
}

// fallback is what the caller serves when the dependency cannot answer:
// kept for the caller, unused by the Transport.
type fallback struct {
	Type        string `json:"type"`
	UserMessage string `json:"user_message"`
}

// observability switches the Transport's reports on or off. A field left
// out leaves them as the other options say.
type observability struct {
	// EmitAttemptMetric: true requires a Metrics (WithMetrics) among the
	// options and is refused without one; false records nothing.
	EmitAttemptMetric *bool `json:"emit_attempt_metric"`
	// TagDependency: true names the Transport after Dependency (WithName)
	// in metrics, logs and spans; false leaves the name as the options say.
	TagDependency *bool `json:"tag_dependency"`
	// TraceAttempts: true requires an attempt hook (WithAttemptHook, as
	// otelretry gives) among the options and is refused without one;
	// false calls none.
	TraceAttempts *bool `json:"trace_attempts"`
	// AttemptHeader and AttemptHeaderValue are WithAttemptHeader's name
	// and value ("{attempt}" if left out).
	AttemptHeader      *string `json:"attempt_header"`
	AttemptHeaderValue *string `json:"attempt_header_value"`
	// DeadlineHeader is WithDeadlineHeader.
	DeadlineHeader *string `json:"deadline_header"`
}
