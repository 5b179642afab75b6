// This file holds policy as data: the Policy type and the schema it is
// read into, in the shape of the per-dependency template that teams write
// (dependency, operation, semantic_safety, time_budget, retry, budget,
// breaker, hedging, fallback, observability, owner), and its operations:
// what applies to the Transport as a whole, and which operation's config
// a request gets, by its method and path; and the fieldOption, an option
// that names its field when it refuses a value. policyload.go reads files
// of them; policyopts.go and policyoverload.go turn one into the Options
// it stands for.

package retryhttp

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/internal/strictjson"
)

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
// Operation, InteractionType and Owner change nothing in how requests
// are sent: they are the caller's. Criticality is WithCriticality, its
// text read by policyCriticality; Fallback is handed to the caller with
// a request that gave up (Error.Fallback, FallbackOf), never served by
// the Transport.
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
// handed to the caller as a Fallback, never served by the Transport.
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
	// CriticalityHeader is WithCriticalityHeader.
	CriticalityHeader *string `json:"criticality_header"`
}

// transportKey is what d says of the Transport as a whole, as text that
// two policies of one dependency must share; "" if it says nothing.
func (d *policyDoc) transportKey() string {
	var connect, body *int64
	var rotate *bool
	if d.TimeBudget != nil {
		connect = d.TimeBudget.ConnectTimeoutMS
	}
	if d.Retry != nil {
		body, rotate = d.Retry.BodyBufferLimit, d.Retry.AddressRotation
	}
	if d.Budget == nil && d.Breaker == nil && connect == nil && d.Observability == nil && d.Hedging == nil && d.Overload == nil && body == nil && rotate == nil {
		return ""
	}
	b, _ := json.Marshal([]any{d.Budget, d.Breaker, connect, d.Observability, d.Hedging, d.Overload, body, rotate})
	return string(b)
}

// transportPart is what d says of the Transport as a whole, alone.
func (d *policyDoc) transportPart() policyDoc {
	q := policyDoc{Dependency: d.Dependency, Budget: d.Budget, Breaker: d.Breaker, Hedging: d.Hedging, Overload: d.Overload, Observability: d.Observability}
	if d.TimeBudget != nil && d.TimeBudget.ConnectTimeoutMS != nil {
		q.TimeBudget = &timeBudget{ConnectTimeoutMS: d.TimeBudget.ConnectTimeoutMS}
	}
	if d.Retry != nil && (d.Retry.BodyBufferLimit != nil || d.Retry.AddressRotation != nil) {
		q.Retry = &retrySpec{BodyBufferLimit: d.Retry.BodyBufferLimit, AddressRotation: d.Retry.AddressRotation}
	}
	return q
}

// An operation is the policy of some requests of a dependency: those that
// its route matches get its options over the Transport's.
type operation struct {
	route routes
	opts  []Option
}

// opError is an error of a dependency's operation, by its index.
type opError struct {
	index int
	err   error
}

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// opErr is err in the operation op, named by its name or its match.
func opErr(op *policyDoc, err error) error {
	name := op.Operation
	if name == "" {
		name = op.Match
	}
	return fmt.Errorf("operation %q: %w", name, err)
}

// operationConfigs builds one config per operation from c, once c is
// complete: each shares c's base, admission, metrics and logger.
func (c *config) operationConfigs() {
	if len(c.operations) == 0 {
		return
	}
	c.opConfigs = make([]*config, len(c.operations))
	for i, op := range c.operations {
		oc := *c
		oc.operations, oc.opConfigs = nil, nil
		for _, o := range op.opts {
			o.apply(&oc) // checked by Options
		}
		oc.schedule = scheduleLength(oc.backoff, oc.maxAttempts)
		c.opConfigs[i] = &oc
	}
}

// operationFor is the config of the first operation that matches req, or c.
func (c *config) operationFor(req *http.Request) *config {
	for i, op := range c.operations {
		if op.route.match(req) {
			return c.opConfigs[i]
		}
	}
	return c
}

// A fieldOption is an option that a policy's field stands for: the field
// is named when the option refuses its value.
type fieldOption struct {
	field string
	o     Option
}

// checked applies each option to a scratch config, in order, and returns
// them, or the first option's error under its field's name: the options'
// own checks are the only checks of a policy's values.
func checked(fos []fieldOption) ([]Option, error) {
	scratch := config{statuses: defaultStatuses}
	opts := make([]Option, 0, len(fos))
	for _, fo := range fos {
		if err := fo.o.apply(&scratch); err != nil {
			return nil, fieldErr(fo.field, "%s", strings.TrimPrefix(err.Error(), "retryhttp: "))
		}
		opts = append(opts, fo.o)
	}
	return opts, nil
}

// millis is *ms milliseconds; a value too long to be a time.Duration is
// an error, a negative one is left for the option to refuse.
func millis(field string, ms int64) (time.Duration, error) {
	if ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
		return 0, fieldErr(field, "%d ms is too long to represent", ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// msOption is the option that a duration field stands for, if it is set.
func msOption(fos []fieldOption, field string, ms *int64, opt func(time.Duration) Option) ([]fieldOption, error) {
	if ms == nil {
		return fos, nil
	}
	d, err := millis(field, *ms)
	if err != nil {
		return nil, err
	}
	return append(fos, fieldOption{field, opt(d)}), nil
}

func asOption[O Option](f func(time.Duration) O) func(time.Duration) Option {
	return func(d time.Duration) Option { return f(d) }
}

// fieldErr is an error about one field of a Policy.
func fieldErr(field, format string, args ...any) error {
	return strictjson.Errorf(field, format, args...)
}
