// This file turns a Policy (policydata.go) into the Options it stands for:
// the dependency's own, and one set per operation that the Transport
// picks by the request's method and path.

package retryhttp

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/hashicorp/go-cleanhttp"
)

// Options returns the Options that p stands for, or an error that names
// the first field that is invalid. Every Option it returns is valid for a
// nil base; time_budget.connect_timeout_ms refuses any other (New says so).
func (p Policy) Options() ([]Option, error) {
	q, names, err := p.normalized()
	if err != nil {
		return nil, err
	}
	opts, err := q.transportOptions()
	if err != nil {
		return nil, err
	}
	ropts, err := q.requestOptions(false)
	if err != nil {
		return nil, names.rename(err)
	}
	opts = append(opts, ropts...)
	if len(q.Operations) > 0 {
		o, err := q.operationsOption()
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	return opts, nil
}

// transportOptions are the options that apply to the Transport as a whole:
// an operation may repeat them, but not change them.
func (p Policy) transportOptions() ([]Option, error) {
	var opts []Option
	for _, part := range []func() (Option, error){p.budgetOption, p.breakerOption, p.dialOption, p.hedgeOption, p.bodyOption} {
		o, err := part()
		if err != nil {
			return nil, err
		}
		if o.apply != nil {
			opts = append(opts, o)
		}
	}
	if ob := p.Observability; ob != nil {
		if ob.TagDependency != nil && *ob.TagDependency {
			if p.Dependency == "" {
				return nil, fieldErr("observability.tag_dependency", "there is no dependency to name the Transport after")
			}
			opts = append(opts, WithName(p.Dependency))
		}
		if ob.EmitAttemptMetric != nil {
			on := *ob.EmitAttemptMetric
			opts = append(opts, Option{apply: func(c *config) error {
				c.needMetrics = on
				if !on {
					c.metricsSrc = nil
				}
				return nil
			}, name: "WithMetrics"})
		}
		if ob.TraceAttempts != nil {
			on := *ob.TraceAttempts
			opts = append(opts, Option{apply: func(c *config) error {
				c.needHook = on
				if !on {
					c.attemptHook = nil
				}
				return nil
			}, name: "WithAttemptHook"})
		}
		if ob.AttemptHeader != "" {
			if !validHeaderName(ob.AttemptHeader) {
				return nil, fieldErr("observability.attempt_header", "%q is not a header name", ob.AttemptHeader)
			}
			opts = append(opts, WithAttemptHeader(ob.AttemptHeader))
		}
	}
	return opts, nil
}

// transportKey is what p says of the Transport as a whole, as text that
// two policies of one dependency must share; "" if it says nothing.
func (p Policy) transportKey() string {
	var connect int64
	if p.TimeBudget != nil {
		connect = p.TimeBudget.ConnectTimeoutMS
	}
	var body *int64
	if p.Retry != nil {
		body = p.Retry.BodyBufferLimitBytes
	}
	if p.Budget == nil && p.Breaker == nil && connect == 0 && p.Observability == nil && p.Hedging == nil && body == nil {
		return ""
	}
	b, _ := json.Marshal([]any{p.Budget, p.Breaker, connect, p.Observability, p.Hedging, body})
	return string(b)
}

// requestOptions are the options that may differ per operation: those of
// the dependency's policy, or of an operation's (op).
func (p Policy) requestOptions(op bool) ([]Option, error) {
	var opts []Option
	r := RetrySpec{}
	if p.Retry != nil {
		r = *p.Retry
	}
	if r.MaxAttemptsTotal < 0 {
		return nil, fieldErr("retry.max_attempts_total", "%d is negative", r.MaxAttemptsTotal)
	}
	if r.MaxAttemptsTotal > 0 {
		opts = append(opts, WithMaxAttempts(r.MaxAttemptsTotal))
	}
	if b, err := r.backoff(); err != nil {
		return nil, err
	} else if b != nil {
		opts = append(opts, WithBackoff(b))
	}
	if err := r.checkStatuses(); err != nil {
		return nil, err
	}
	if r.RetryableStatus != nil {
		opts = append(opts, WithRetryableStatuses(r.RetryableStatus...))
	}
	if r.NonRetryableStatus != nil {
		opts = append(opts, WithNonRetryableStatuses(r.NonRetryableStatus...))
	}
	tb := TimeBudget{}
	if p.TimeBudget != nil {
		tb = *p.TimeBudget
	}
	for _, d := range []struct {
		field string
		ms    int64
		opt   func(time.Duration) Option
	}{
		{"time_budget.read_timeout_ms", tb.ReadTimeoutMS, WithPerAttemptTimeout},
		{"time_budget.caller_deadline_ms", tb.CallerDeadlineMS, WithMaxElapsed},
		{"retry.max_retry_after_ms", r.MaxRetryAfterMS, WithMaxRetryAfter},
	} {
		v, err := millis(d.field, d.ms)
		if err != nil {
			return nil, err
		}
		if v > 0 {
			opts = append(opts, d.opt(v))
		}
	}
	so, err := p.safetyOptions(op)
	if err != nil {
		return nil, err
	}
	return append(opts, so...), nil
}

// millis is ms milliseconds, or an error naming field if it is negative
// or too long to be a time.Duration.
func millis(field string, ms int64) (time.Duration, error) {
	if ms < 0 {
		return 0, fieldErr(field, "%d is negative", ms)
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, fieldErr(field, "%d is too long", ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// safetyOptions are the options of the semantic_safety section of a
// dependency's policy, or of an operation's (op).
func (p Policy) safetyOptions(op bool) ([]Option, error) {
	s := p.SemanticSafety
	if s == nil {
		return nil, nil
	}
	var opts []Option
	if !s.Idempotent && s.SideEffect != nil && !*s.SideEffect {
		return nil, fieldErr("semantic_safety.side_effect", "false, but idempotent is false: a request without a side effect is idempotent (write idempotent: true)")
	}
	switch {
	case s.Idempotent:
		opts = append(opts, WithIdempotentIf(alwaysSafe))
	case len(s.IdempotentRequests) > 0:
		rs, err := parseRoutes(s.IdempotentRequests)
		if err != nil {
			return nil, fieldErr("semantic_safety.idempotent_requests", "%v", err)
		}
		opts = append(opts, WithIdempotentIf(rs.match))
	case op:
		// An operation's section that declares nothing undoes the
		// dependency's declaration: its idempotent: false under the
		// dependency's true.
		opts = append(opts, Option{apply: func(c *config) error {
			c.declaredSafe = nil
			return nil
		}, name: "WithIdempotentIf", perRequest: true})
	}
	if len(s.IdempotencyKeys) > 0 {
		for _, m := range s.IdempotencyKeys {
			if !validHeaderName(m) { // a method is a token too; its case does not matter, as in WithIdempotencyKeys
				return nil, fieldErr("semantic_safety.idempotency_keys", "%q is not a method", m)
			}
		}
		opts = append(opts, WithIdempotencyKeys(s.IdempotencyKeys...))
	}
	return opts, nil
}

// An operation is the policy of some requests of a dependency: those that
// its route matches get its options over the Transport's.
type operation struct {
	route routes
	opts  []Option
}

// operationsOption carries p's operations to the Transport, which builds
// one config for each in newConfig.
func (p Policy) operationsOption() (Option, error) {
	key := p.transportKey()
	var ops []operation
	for _, op := range p.Operations {
		q, names, err := op.normalized()
		if err != nil {
			return Option{}, opErr(op, err)
		}
		if len(q.Operations) > 0 {
			return Option{}, opErr(op, fieldErr("operations", "an operation has no operations of its own"))
		}
		if k := q.transportKey(); k != "" && k != key {
			return Option{}, opErr(op, fieldErr("budget, breaker, hedging, observability, time_budget.connect_timeout_ms, retry.body_buffer_limit_bytes",
				"an operation may repeat the dependency's, not change them: they apply to the Transport as a whole"))
		}
		rs, err := parseRoutes([]string{q.Match})
		if err != nil {
			return Option{}, opErr(op, fieldErr("match", "%v", err))
		}
		opts, err := q.requestOptions(true)
		if err != nil {
			return Option{}, opErr(op, names.rename(err))
		}
		ops = append(ops, operation{rs, opts})
	}
	return Option{apply: func(c *config) error {
		c.operations = ops
		return nil
	}, name: "operations"}, nil
}

// opErr is err in the operation op, named by its name or its match.
func opErr(op Policy, err error) error {
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
			o.apply(&oc) // validated by Options
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

func (r RetrySpec) backoff() (Backoff, error) {
	base, err := millis("retry.initial_delay_ms", r.InitialDelayMS)
	if err != nil {
		return nil, err
	}
	maxd, err := millis("retry.max_delay_ms", r.MaxDelayMS)
	if err != nil {
		return nil, err
	}
	if r.Backoff == "" && base == 0 && maxd == 0 {
		return nil, nil
	}
	if base == 0 {
		base = DefaultBackoffBase
	}
	if maxd == 0 {
		maxd = max(DefaultBackoffMax, base)
	}
	if r.Backoff != "constant" && maxd < base {
		return nil, fieldErr("retry.max_delay_ms", "%v is less than initial_delay_ms %v", maxd, base)
	}
	switch r.Backoff {
	case "", "exponential_full_jitter":
		return fullJitter{base, maxd}, nil
	case "exponential_equal_jitter":
		return equalJitter{base, maxd}, nil
	case "decorrelated_jitter":
		return decorrelatedJitter{base, maxd}, nil
	case "exponential":
		return exponential{base, maxd}, nil
	case "constant":
		return constant(base), nil
	}
	return nil, fieldErr("retry.backoff", "%q is not one of exponential_full_jitter, exponential_equal_jitter, decorrelated_jitter, exponential, constant", r.Backoff)
}

// checkStatuses checks the status lists: codes in 100..999, none in both.
func (r RetrySpec) checkStatuses() error {
	for _, f := range []struct {
		field string
		codes []int
	}{{"retry.retryable_status", r.RetryableStatus}, {"retry.non_retryable_status", r.NonRetryableStatus}} {
		for _, c := range f.codes {
			if c < 100 || c > 999 {
				return fieldErr(f.field, "status code %d is outside 100..999", c)
			}
		}
	}
	for _, c := range r.NonRetryableStatus {
		if slices.Contains(r.RetryableStatus, c) {
			return fieldErr("retry.non_retryable_status", "%d is also in retryable_status", c)
		}
	}
	return nil
}

// budgetOption is the Budget's option, if the policy sets one.
func (p Policy) budgetOption() (Option, error) {
	b := p.Budget
	if b == nil {
		return Option{}, nil
	}
	floor, ratio := float64(DefaultBudgetPerSecond), float64(DefaultBudgetRatio)
	if b.MinRetriesPerSecond != nil {
		floor = *b.MinRetriesPerSecond
	}
	if b.MaxRetryRatio != nil {
		ratio = *b.MaxRetryRatio
	}
	switch {
	case b.Disabled:
		return WithoutBudget(), nil
	case ratio < 0 || math.IsNaN(ratio) || math.IsInf(ratio, 0):
		return Option{}, fieldErr("budget.max_retry_ratio", "%v must be a finite number >= 0", ratio)
	case floor < 0 || math.IsNaN(floor) || math.IsInf(floor, 0):
		return Option{}, fieldErr("budget.min_retries_per_second", "%v must be a finite number >= 0", floor)
	}
	return WithBudget(NewBudget(ratio, floor)), nil
}

// breakerOption is the breaker's option, if the policy sets one.
func (p Policy) breakerOption() (Option, error) {
	b := p.Breaker
	if b == nil {
		return Option{}, nil
	}
	switch {
	case b.Threshold < 0:
		return Option{}, fieldErr("breaker.threshold", "%d is negative", b.Threshold)
	case b.Threshold > maxThreshold:
		return Option{}, fieldErr("breaker.threshold", "%d is above %d", b.Threshold, maxThreshold)
	}
	hold, err := millis("breaker.max_hold_ms", b.MaxHoldMS)
	if err != nil {
		return Option{}, err
	}
	if b.Disabled {
		return WithoutRetryBreaker(), nil
	}
	return WithRetryBreaker(BreakerConfig{FailFast: b.FailFast, Threshold: b.Threshold,
		MaxHold: hold}), nil
}

// dialOption sets the dial timeout of the base the Transport builds, if
// the policy sets one.
func (p Policy) dialOption() (Option, error) {
	if p.TimeBudget == nil || p.TimeBudget.ConnectTimeoutMS == 0 {
		return Option{}, nil
	}
	d, err := millis("time_budget.connect_timeout_ms", p.TimeBudget.ConnectTimeoutMS)
	if err != nil {
		return Option{}, err
	}
	return WithDialTimeout(d), nil
}

// bodyOption is WithBodyBufferLimit, if the policy sets it.
func (p Policy) bodyOption() (Option, error) {
	if p.Retry == nil || p.Retry.BodyBufferLimitBytes == nil {
		return Option{}, nil
	}
	n := *p.Retry.BodyBufferLimitBytes
	if n < 0 {
		return Option{}, fieldErr("retry.body_buffer_limit_bytes", "%d is negative", n)
	}
	return WithBodyBufferLimit(n), nil
}

// transportPart is what p says of the Transport as a whole, alone.
func (p Policy) transportPart() Policy {
	q := Policy{Dependency: p.Dependency, Budget: p.Budget, Breaker: p.Breaker, Hedging: p.Hedging, Observability: p.Observability}
	if p.TimeBudget != nil && p.TimeBudget.ConnectTimeoutMS != 0 {
		q.TimeBudget = &TimeBudget{ConnectTimeoutMS: p.TimeBudget.ConnectTimeoutMS}
	}
	if p.Retry != nil && p.Retry.BodyBufferLimitBytes != nil {
		q.Retry = &RetrySpec{BodyBufferLimitBytes: p.Retry.BodyBufferLimitBytes}
	}
	return q
}

// hedgeOption is hedging's option, if the policy sets it.
func (p Policy) hedgeOption() (Option, error) {
	h := p.Hedging
	if h == nil {
		return Option{}, nil
	}
	d, err := millis("hedging.delay_ms", h.DelayMS)
	switch {
	case err != nil:
		return Option{}, err
	case math.IsNaN(h.Percentile) || h.Percentile < 0 || h.Percentile >= 1:
		return Option{}, fieldErr("hedging.percentile", "%v must be in (0, 1)", h.Percentile)
	case h.MaxExtra < 0 || h.MaxExtra > maxHedgeExtra:
		return Option{}, fieldErr("hedging.max_extra", "%d must be in 0..%d", h.MaxExtra, maxHedgeExtra)
	}
	return WithHedging(HedgeConfig{Delay: d, Percentile: h.Percentile, MaxExtra: h.MaxExtra}), nil
}

// dialingBase is the base a Transport builds when a policy sets its dial
// timeout: cleanhttp's pooled transport with that timeout.
func dialingBase(timeout time.Duration) *http.Transport {
	t := cleanhttp.DefaultPooledTransport()
	t.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	return t
}
