// This file holds policy as data: the Policy type, in the shape of the
// per-dependency template that architecture teams write (dependency,
// operation, semantic_safety, time_budget, retry, budget, fallback,
// observability, owner), and the older flat form it still reads.
// policyload.go reads files of them; policyopts.go turns one into Options.

package retryhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A Policy is a retry policy written as data, for one dependency or one
// operation of it: the template that teams write per dependency, in JSON
// (LoadPolicies) or YAML (the yamlpolicy module). A field left out keeps
// the default; the docs/policy.md page maps every field to its Option.
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
// Dependency names the Transport (Policies.Transports). Operation,
// InteractionType, Criticality, Fallback and Owner change nothing in how
// requests are sent: they are kept for the caller (a fallback is the
// caller's to serve, for example when an error matching ErrCircuitOpen
// comes back).
type Policy struct {
	Dependency string `json:"dependency,omitempty" yaml:"dependency,omitempty"`
	Operation  string `json:"operation,omitempty" yaml:"operation,omitempty"`
	// Match says which requests of the dependency this operation's policy
	// applies to, as "METHOD /path/pattern" (path.Match on the URL path):
	// "GET /parties/*". A policy without Match is the dependency's, for
	// every request that no operation matches.
	Match           string `json:"match,omitempty" yaml:"match,omitempty"`
	InteractionType string `json:"interaction_type,omitempty" yaml:"interaction_type,omitempty"`
	Criticality     string `json:"criticality,omitempty" yaml:"criticality,omitempty"`

	SemanticSafety *SemanticSafety `json:"semantic_safety,omitempty" yaml:"semantic_safety,omitempty"`
	TimeBudget     *TimeBudget     `json:"time_budget,omitempty" yaml:"time_budget,omitempty"`
	Retry          *RetrySpec      `json:"retry,omitempty" yaml:"retry,omitempty"`
	Budget         *BudgetSpec     `json:"budget,omitempty" yaml:"budget,omitempty"`   // WithBudget
	Breaker        *BreakerSpec    `json:"breaker,omitempty" yaml:"breaker,omitempty"` // WithRetryBreaker
	Hedging        *HedgeSpec      `json:"hedging,omitempty" yaml:"hedging,omitempty"` // WithHedging
	Fallback       *Fallback       `json:"fallback,omitempty" yaml:"fallback,omitempty"`
	Observability  *Observability  `json:"observability,omitempty" yaml:"observability,omitempty"`
	Owner          string          `json:"owner,omitempty" yaml:"owner,omitempty"`

	// Operations are the policies of the dependency's operations that
	// carry a Match, in the order they were written; LoadPolicies fills
	// it. The first whose Match fits a request applies to it, over the
	// dependency's own fields.
	Operations []Policy `json:"-" yaml:"-"`

	// The flat form of earlier versions, still read. A field written both
	// ways is an error.

	// Deprecated: use Retry.MaxAttemptsTotal.
	MaxAttemptsTotal int `json:"max_attempts_total,omitempty" yaml:"max_attempts_total,omitempty"`
	// Deprecated: use Retry.Backoff.
	Backoff string `json:"backoff,omitempty" yaml:"backoff,omitempty"`
	// Deprecated: use Retry.InitialDelayMS.
	InitialDelay Duration `json:"initial_delay,omitempty" yaml:"initial_delay,omitempty"`
	// Deprecated: use Retry.MaxDelayMS.
	MaxDelay Duration `json:"max_delay,omitempty" yaml:"max_delay,omitempty"`
	// Deprecated: use Retry.RetryableStatus.
	RetryableStatus []int `json:"retryable_status,omitempty" yaml:"retryable_status,omitempty"`
	// Deprecated: use Retry.NonRetryableStatus.
	NonRetryableStatus []int `json:"non_retryable_status,omitempty" yaml:"non_retryable_status,omitempty"`
	// Deprecated: use TimeBudget.ReadTimeoutMS.
	PerAttemptTimeout Duration `json:"per_attempt_timeout,omitempty" yaml:"per_attempt_timeout,omitempty"`
	// Deprecated: use TimeBudget.CallerDeadlineMS.
	MaxElapsed Duration `json:"max_elapsed,omitempty" yaml:"max_elapsed,omitempty"`
	// Deprecated: use Retry.MaxRetryAfterMS.
	MaxRetryAfter Duration `json:"max_retry_after,omitempty" yaml:"max_retry_after,omitempty"`
	// Deprecated: use SemanticSafety.IdempotencyKeys.
	IdempotencyKeys []string `json:"idempotency_keys,omitempty" yaml:"idempotency_keys,omitempty"`
	// Deprecated: use SemanticSafety.IdempotentRequests.
	IdempotentRequests []string `json:"idempotent_requests,omitempty" yaml:"idempotent_requests,omitempty"`
}

// SemanticSafety says whether the dependency's requests may be repeated.
type SemanticSafety struct {
	// Idempotent: true declares every request the policy applies to safe
	// to repeat, whatever its method (WithIdempotentIf): repeating it does
	// what sending it once does, with or without a side effect. False
	// declares nothing: the method and an idempotency key decide, as for
	// any request (retry.max_attempts_total: 1 sends each request once);
	// in an operation, it undoes the dependency's declaration.
	Idempotent bool `json:"idempotent,omitempty" yaml:"idempotent,omitempty"`
	// SideEffect: false with Idempotent: false is a contradiction (a
	// request without a side effect is idempotent) and is refused.
	SideEffect *bool `json:"side_effect,omitempty" yaml:"side_effect,omitempty"`
	// IdempotencyKeys are the methods that get an Idempotency-Key
	// (WithIdempotencyKeys): only for a server that deduplicates keys.
	IdempotencyKeys []string `json:"idempotency_keys,omitempty" yaml:"idempotency_keys,omitempty"`
	// IdempotentRequests declares some requests safe to repeat, as
	// "METHOD /path/pattern" entries: ["POST /*/_search"].
	IdempotentRequests []string `json:"idempotent_requests,omitempty" yaml:"idempotent_requests,omitempty"`
}

// TimeBudget bounds the time a call may take, in milliseconds.
type TimeBudget struct {
	// CallerDeadlineMS bounds the whole call as WithMaxElapsed does: no
	// retry starts that would end past it. It sets no context deadline,
	// which would also cut the body that the caller reads after RoundTrip
	// returns; an attempt that hangs is cut by ReadTimeoutMS, and the
	// caller's own context bounds the rest.
	CallerDeadlineMS int64 `json:"caller_deadline_ms,omitempty" yaml:"caller_deadline_ms,omitempty"`
	// ConnectTimeoutMS is the dial timeout of the base transport that the
	// Transport builds. It needs a nil base: with a base of the caller's,
	// New refuses it (set the timeout on that base's Dialer instead).
	ConnectTimeoutMS int64 `json:"connect_timeout_ms,omitempty" yaml:"connect_timeout_ms,omitempty"`
	// ReadTimeoutMS bounds each attempt's wait for response headers
	// (WithPerAttemptTimeout).
	ReadTimeoutMS int64 `json:"read_timeout_ms,omitempty" yaml:"read_timeout_ms,omitempty"`
}

// RetrySpec says how often and how soon requests are retried.
type RetrySpec struct {
	MaxAttemptsTotal int `json:"max_attempts_total,omitempty" yaml:"max_attempts_total,omitempty"` // WithMaxAttempts
	// Backoff names the strategy: exponential_full_jitter (the default),
	// exponential_equal_jitter, decorrelated_jitter, exponential, constant.
	Backoff        string `json:"backoff,omitempty" yaml:"backoff,omitempty"`
	InitialDelayMS int64  `json:"initial_delay_ms,omitempty" yaml:"initial_delay_ms,omitempty"` // the backoff's base (constant: its delay)
	MaxDelayMS     int64  `json:"max_delay_ms,omitempty" yaml:"max_delay_ms,omitempty"`         // the backoff's cap
	// RetryableStatus replaces the statuses retried (WithRetryableStatuses);
	// NonRetryableStatus removes some from them, or from the defaults
	// (keeping the keyed-409 rule unless 409 is listed).
	RetryableStatus    []int `json:"retryable_status,omitempty" yaml:"retryable_status,omitempty"`
	NonRetryableStatus []int `json:"non_retryable_status,omitempty" yaml:"non_retryable_status,omitempty"`
	MaxRetryAfterMS    int64 `json:"max_retry_after_ms,omitempty" yaml:"max_retry_after_ms,omitempty"` // WithMaxRetryAfter
	// BodyBufferLimitBytes is WithBodyBufferLimit: how much of a body
	// without GetBody is kept to send it again (0 keeps none). It applies
	// to the Transport as a whole.
	BodyBufferLimitBytes *int64 `json:"body_buffer_limit_bytes,omitempty" yaml:"body_buffer_limit_bytes,omitempty"`
}

// HedgeSpec is a HedgeConfig written as data (WithHedging): a zero field
// takes its default.
type HedgeSpec struct {
	DelayMS    int64   `json:"delay_ms,omitempty" yaml:"delay_ms,omitempty"`
	Percentile float64 `json:"percentile,omitempty" yaml:"percentile,omitempty"`
	MaxExtra   int     `json:"max_extra,omitempty" yaml:"max_extra,omitempty"`
}

// BudgetSpec is a Budget written as data: NewBudget(MaxRetryRatio,
// MinRetriesPerSecond), or none if Disabled. A field left out keeps its
// default (0.1 and 10: an empty object is the default budget); write 0
// for no floor.
type BudgetSpec struct {
	MaxRetryRatio       *float64 `json:"max_retry_ratio,omitempty" yaml:"max_retry_ratio,omitempty"`
	MinRetriesPerSecond *float64 `json:"min_retries_per_second,omitempty" yaml:"min_retries_per_second,omitempty"`
	Disabled            bool     `json:"disabled,omitempty" yaml:"disabled,omitempty"`
}

// BreakerSpec is a BreakerConfig written as data (WithRetryBreaker), or
// none if Disabled (WithoutRetryBreaker).
type BreakerSpec struct {
	Disabled  bool  `json:"disabled,omitempty" yaml:"disabled,omitempty"`
	FailFast  bool  `json:"fail_fast,omitempty" yaml:"fail_fast,omitempty"`
	Threshold int   `json:"threshold,omitempty" yaml:"threshold,omitempty"`
	MaxHoldMS int64 `json:"max_hold_ms,omitempty" yaml:"max_hold_ms,omitempty"`
	// Deprecated: use MaxHoldMS, in milliseconds as every duration of a
	// policy is.
	MaxHold Duration `json:"max_hold,omitempty" yaml:"max_hold,omitempty"`
}

// Fallback is what the caller serves when the dependency cannot answer.
// retryhttp keeps it for the caller and does nothing with it.
type Fallback struct {
	Type        string `json:"type,omitempty" yaml:"type,omitempty"`
	UserMessage string `json:"user_message,omitempty" yaml:"user_message,omitempty"`
}

// Observability switches the Transport's reports on or off. A field left
// out leaves them as the other options say.
type Observability struct {
	// EmitAttemptMetric: true requires a Metrics (WithMetrics) among the
	// options and is refused without one; false records nothing.
	EmitAttemptMetric *bool `json:"emit_attempt_metric,omitempty" yaml:"emit_attempt_metric,omitempty"`
	// TagDependency: true names the Transport after Dependency (WithName)
	// in metrics, logs and spans; false leaves the name as the options say.
	TagDependency *bool `json:"tag_dependency,omitempty" yaml:"tag_dependency,omitempty"`
	// TraceAttempts: true requires an attempt hook (WithAttemptHook, as
	// otelretry gives) among the options and is refused without one;
	// false calls none.
	TraceAttempts *bool `json:"trace_attempts,omitempty" yaml:"trace_attempts,omitempty"`
	// AttemptHeader is WithAttemptHeader: the header that carries a
	// retry's attempt number.
	AttemptHeader string `json:"attempt_header,omitempty" yaml:"attempt_header,omitempty"`
}

// Duration is a time.Duration written in JSON as a Go duration string.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// MarshalText writes d as a duration string, for YAML libraries.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a duration string such as "250ms", for YAML
// libraries (gopkg.in/yaml.v3 decodes a scalar through it).
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// UnmarshalJSON reads a duration string such as "250ms".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"250ms\", not %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// normalized returns p with its flat fields moved into their sections,
// so that the rest reads the sections alone, and the names of the moved
// fields, so that an error names the field as it was written; a field
// written both ways is an error that names both.
func (p Policy) normalized() (Policy, flatNames, error) {
	q := p
	retry := RetrySpec{}
	if p.Retry != nil {
		retry = *p.Retry
	}
	tb := TimeBudget{}
	if p.TimeBudget != nil {
		tb = *p.TimeBudget
	}
	ss := SemanticSafety{}
	if p.SemanticSafety != nil {
		ss = *p.SemanticSafety
	}
	for _, d := range []struct {
		flat string
		v    Duration
	}{{"initial_delay", p.InitialDelay}, {"max_delay", p.MaxDelay}, {"max_retry_after", p.MaxRetryAfter},
		{"per_attempt_timeout", p.PerAttemptTimeout}, {"max_elapsed", p.MaxElapsed}} {
		if d.v < 0 {
			return p, nil, fieldErr(d.flat, "%v is negative", d.v)
		}
	}
	// ms rounds up, so that a sub-millisecond duration stays one.
	ms := func(d Duration) int64 { return int64((time.Duration(d) + time.Millisecond - 1) / time.Millisecond) }
	moves := []struct {
		flat, section string
		set, taken    bool
		move          func()
	}{
		{"max_attempts_total", "retry.max_attempts_total", p.MaxAttemptsTotal != 0, retry.MaxAttemptsTotal != 0,
			func() { retry.MaxAttemptsTotal = p.MaxAttemptsTotal }},
		{"backoff", "retry.backoff", p.Backoff != "", retry.Backoff != "", func() { retry.Backoff = p.Backoff }},
		{"initial_delay", "retry.initial_delay_ms", p.InitialDelay != 0, retry.InitialDelayMS != 0,
			func() { retry.InitialDelayMS = ms(p.InitialDelay) }},
		{"max_delay", "retry.max_delay_ms", p.MaxDelay != 0, retry.MaxDelayMS != 0,
			func() { retry.MaxDelayMS = ms(p.MaxDelay) }},
		{"retryable_status", "retry.retryable_status", p.RetryableStatus != nil, retry.RetryableStatus != nil,
			func() { retry.RetryableStatus = p.RetryableStatus }},
		{"non_retryable_status", "retry.non_retryable_status", p.NonRetryableStatus != nil, retry.NonRetryableStatus != nil,
			func() { retry.NonRetryableStatus = p.NonRetryableStatus }},
		{"max_retry_after", "retry.max_retry_after_ms", p.MaxRetryAfter != 0, retry.MaxRetryAfterMS != 0,
			func() { retry.MaxRetryAfterMS = ms(p.MaxRetryAfter) }},
		{"per_attempt_timeout", "time_budget.read_timeout_ms", p.PerAttemptTimeout != 0, tb.ReadTimeoutMS != 0,
			func() { tb.ReadTimeoutMS = ms(p.PerAttemptTimeout) }},
		{"max_elapsed", "time_budget.caller_deadline_ms", p.MaxElapsed != 0, tb.CallerDeadlineMS != 0,
			func() { tb.CallerDeadlineMS = ms(p.MaxElapsed) }},
		{"idempotency_keys", "semantic_safety.idempotency_keys", p.IdempotencyKeys != nil, ss.IdempotencyKeys != nil,
			func() { ss.IdempotencyKeys = p.IdempotencyKeys }},
		{"idempotent_requests", "semantic_safety.idempotent_requests", p.IdempotentRequests != nil, ss.IdempotentRequests != nil,
			func() { ss.IdempotentRequests = p.IdempotentRequests }},
	}
	var names flatNames
	if b := p.Breaker; b != nil && b.MaxHold != 0 {
		switch {
		case b.MaxHold < 0:
			return p, nil, fieldErr("breaker.max_hold", "%v is negative", b.MaxHold)
		case b.MaxHoldMS != 0:
			return p, nil, fieldErr("breaker.max_hold", "written again as breaker.max_hold_ms: keep breaker.max_hold_ms alone")
		}
		nb := *b
		nb.MaxHoldMS, nb.MaxHold = ms(b.MaxHold), 0
		q.Breaker = &nb
	}
	for _, m := range moves {
		if !m.set {
			continue
		}
		if m.taken {
			return p, nil, fieldErr(m.flat, "written again as %s: keep %s alone", m.section, m.section)
		}
		m.move()
		if names == nil {
			names = flatNames{}
		}
		names[m.section] = m.flat
		switch {
		case strings.HasPrefix(m.section, "retry."):
			q.Retry = &retry
		case strings.HasPrefix(m.section, "time_budget."):
			q.TimeBudget = &tb
		default:
			q.SemanticSafety = &ss
		}
	}
	q.MaxAttemptsTotal, q.Backoff, q.InitialDelay, q.MaxDelay = 0, "", 0, 0
	q.RetryableStatus, q.NonRetryableStatus, q.MaxRetryAfter = nil, nil, 0
	q.PerAttemptTimeout, q.MaxElapsed, q.IdempotencyKeys, q.IdempotentRequests = 0, 0, nil, nil
	return q, names, nil
}

// flatNames maps a section's field to the flat field it was written as.
type flatNames map[string]string

// rename makes err name a field as it was written.
func (n flatNames) rename(err error) error {
	var fe *fieldError
	if errors.As(err, &fe) && n[fe.field] != "" {
		return &fieldError{n[fe.field], fe.msg}
	}
	return err
}
