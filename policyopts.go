// This file turns a Policy (policy.go) into the Options it stands for:
// the table from field to option, the one check of every value (the
// option's own, reported under the field's name), and the sections of the
// retry loop (retry, time_budget, semantic_safety, observability);
// admission's sections are policyoverload.go's.

package retryhttp

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/internal/strictjson"
)

// Options returns the Options that p stands for, or an error that names
// the first field whose value its option refuses. Every Option it returns
// is valid for a nil base; time_budget.connect_timeout_ms refuses any
// other (New says so).
func (p Policy) Options() ([]Option, error) {
	if p.doc.Match != "" {
		if _, err := parseRoutes([]string{p.doc.Match}); err != nil {
			return nil, fieldErr("match", "%v", err)
		}
	}
	fos, err := p.doc.options(false)
	if err != nil {
		return nil, err
	}
	opts, err := checked(fos)
	if err != nil {
		return nil, err
	}
	if dep := p.doc.Dependency; dep != "" {
		opts = append(opts, option("dependency", func(c *config) error { c.dependency = dep; return nil }))
	}
	if len(p.ops) > 0 {
		o, err := p.operationsOption()
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	return opts, nil
}

// options are the options of d, in the order they apply: those of the
// Transport as a whole (none for an operation, op, whose own are checked
// against the dependency's), then those that may differ per operation.
func (d *policyDoc) options(op bool) ([]fieldOption, error) {
	var fos []fieldOption
	rows := []func(*policyDoc) ([]fieldOption, error){
		(*policyDoc).retryOptions, (*policyDoc).timeOptions, (*policyDoc).callerOptions,
	}
	if !op {
		rows = append([]func(*policyDoc) ([]fieldOption, error){
			(*policyDoc).budgetOptions, (*policyDoc).breakerOptions, (*policyDoc).hedgeOptions, (*policyDoc).overloadOptions,
			(*policyDoc).transportTimeOptions, (*policyDoc).observabilityOptions,
		}, rows...)
	}
	for _, row := range rows {
		more, err := row(d)
		if err != nil {
			return nil, err
		}
		fos = append(fos, more...)
	}
	more, err := d.safetyOptions(op)
	if err != nil {
		return nil, err
	}
	return append(fos, more...), nil
}

// retryOptions: retry.max_attempts_total, the backoff, the statuses and
// retry.max_retry_after_ms.
func (d *policyDoc) retryOptions() ([]fieldOption, error) {
	r := d.Retry
	if r == nil {
		return nil, nil
	}
	var fos []fieldOption
	if r.MaxAttemptsTotal != nil {
		fos = append(fos, fieldOption{"retry.max_attempts_total", WithMaxAttempts(*r.MaxAttemptsTotal)})
	}
	if r.Backoff != nil || r.InitialDelayMS != nil || r.MaxDelayMS != nil {
		field, b, err := r.backoff()
		var fe *strictjson.FieldError
		switch {
		case errors.As(err, &fe):
			return nil, err
		case err != nil:
			return nil, fieldErr(field, "%s", strings.TrimPrefix(err.Error(), "retryhttp: "))
		}
		fos = append(fos, fieldOption{field, WithBackoff(b)})
	}
	if r.RetryableStatus != nil {
		fos = append(fos, fieldOption{"retry.retryable_status", WithRetryableStatuses(r.RetryableStatus...)})
	}
	if r.NonRetryableStatus != nil {
		fos = append(fos, fieldOption{"retry.non_retryable_status", WithNonRetryableStatuses(r.NonRetryableStatus...)})
	}
	return msOption(fos, "retry.max_retry_after_ms", r.MaxRetryAfterMS, asOption(WithMaxRetryAfter))
}

// backoffs are the strategies a policy may name, by their constructors'
// checks: the constructor's name and what it makes.
var backoffs = map[string]struct {
	fn   string
	make func(base, max time.Duration) Backoff
}{
	"exponential_full_jitter":  {"FullJitter", func(b, m time.Duration) Backoff { return fullJitter{b, m} }},
	"exponential_equal_jitter": {"EqualJitter", func(b, m time.Duration) Backoff { return equalJitter{b, m} }},
	"decorrelated_jitter":      {"DecorrelatedJitter", func(b, m time.Duration) Backoff { return decorrelatedJitter{b, m} }},
	"exponential":              {"Exponential", func(b, m time.Duration) Backoff { return exponential{b, m} }},
	"constant":                 {"Constant", func(b, _ time.Duration) Backoff { return constant(b) }},
}

// backoff is the Backoff of r's backoff fields, a field left out taking
// its default (the strategy exponential_full_jitter, the base 200ms, the
// cap 10s or the base if larger; constant's delay is the base), or the
// field to blame and the constructor's error.
func (r *retrySpec) backoff() (string, Backoff, error) {
	name := "exponential_full_jitter"
	if r.Backoff != nil {
		name = *r.Backoff
	}
	kind, ok := backoffs[name]
	if !ok {
		return "retry.backoff", nil, fmt.Errorf("%q is not one of exponential_full_jitter, exponential_equal_jitter, decorrelated_jitter, exponential, constant", name)
	}
	base, maxd, field, err := r.delays(name == "constant")
	if err != nil {
		return field, nil, err
	}
	if err := baseErr(kind.fn, base, maxd); err != nil {
		field := "retry.initial_delay_ms"
		if base >= 0 {
			field = "retry.max_delay_ms"
		}
		return field, nil, err
	}
	return r.backoffField(), kind.make(base, maxd), nil
}

// delays are the backoff's base and cap, from retry.initial_delay_ms and
// retry.max_delay_ms (a constant has no cap); field names the field an
// error is about.
func (r *retrySpec) delays(constant bool) (base, maxd time.Duration, field string, err error) {
	base = defaultBackoffBase
	if r.InitialDelayMS != nil {
		if base, err = millis("retry.initial_delay_ms", *r.InitialDelayMS); err != nil {
			return 0, 0, "retry.initial_delay_ms", err
		}
	}
	maxd = max(defaultBackoffMax, base)
	if r.MaxDelayMS != nil {
		if maxd, err = millis("retry.max_delay_ms", *r.MaxDelayMS); err != nil {
			return 0, 0, "retry.max_delay_ms", err
		}
	}
	switch {
	case constant && r.MaxDelayMS != nil:
		return 0, 0, "retry.max_delay_ms", errors.New("set, but a constant backoff has no cap: leave it out")
	case constant:
		maxd = base // a constant has no cap
	}
	return base, maxd, "", nil
}

// backoffField is the field that says the backoff: retry.backoff, or the
// delay that sets it.
func (r *retrySpec) backoffField() string {
	switch {
	case r.Backoff != nil:
		return "retry.backoff"
	case r.InitialDelayMS != nil:
		return "retry.initial_delay_ms"
	}
	return "retry.max_delay_ms"
}

// timeOptions: time_budget.read_timeout_ms and caller_deadline_ms.
func (d *policyDoc) timeOptions() ([]fieldOption, error) {
	tb := d.TimeBudget
	if tb == nil {
		return nil, nil
	}
	fos, err := msOption(nil, "time_budget.read_timeout_ms", tb.ReadTimeoutMS, asOption(WithPerAttemptTimeout))
	if err != nil {
		return nil, err
	}
	return msOption(fos, "time_budget.caller_deadline_ms", tb.CallerDeadlineMS, asOption(WithMaxElapsed))
}

// transportTimeOptions: time_budget.connect_timeout_ms and
// retry.body_buffer_limit_bytes, which apply to the Transport as a whole.
func (d *policyDoc) transportTimeOptions() ([]fieldOption, error) {
	var fos []fieldOption
	if d.TimeBudget != nil {
		var err error
		if fos, err = msOption(fos, "time_budget.connect_timeout_ms", d.TimeBudget.ConnectTimeoutMS, WithDialTimeout); err != nil {
			return nil, err
		}
	}
	if d.Retry != nil && d.Retry.BodyBufferLimit != nil {
		fos = append(fos, fieldOption{"retry.body_buffer_limit_bytes", WithBodyBufferLimit(*d.Retry.BodyBufferLimit)})
	}
	if d.Retry != nil && d.Retry.AddressRotation != nil {
		on := *d.Retry.AddressRotation
		fos = append(fos, fieldOption{"retry.address_rotation", option("WithAddressRotation", func(c *config) error {
			c.rotate = on
			return nil
		})})
	}
	return fos, nil
}

// safetyOptions are the options of the semantic_safety section of a
// dependency's policy, or of an operation's (op).
func (d *policyDoc) safetyOptions(op bool) ([]fieldOption, error) {
	s := d.SemanticSafety
	if s == nil {
		return nil, nil
	}
	decl, err := s.declaration(op)
	if err != nil {
		return nil, err
	}
	var fos []fieldOption
	if decl.o != nil {
		fos = append(fos, decl)
	}
	if s.IdempotencyKeys != nil {
		fos = append(fos, fieldOption{"semantic_safety.idempotency_keys", WithIdempotencyKeys(s.IdempotencyKeys...)})
	}
	if s.UnprocessedStatus != nil {
		fos = append(fos, fieldOption{"semantic_safety.unprocessed_status", WithUnprocessedStatuses(s.UnprocessedStatus...)})
	}
	return fos, nil
}

// declaration is the option of what the section declares of the requests:
// every one unsafe (side_effect: true), safe (idempotent, or those of
// idempotent_requests), or, in an operation, neither; none if it says
// nothing of it.
func (s *semanticSafety) declaration(op bool) (fieldOption, error) {
	rs, err := s.routes()
	if err != nil {
		return fieldOption{}, err
	}
	switch {
	case s.unsafe():
		return fieldOption{"semantic_safety.side_effect", notIdempotentOption()}, nil
	case isTrue(s.Idempotent):
		return fieldOption{"semantic_safety.idempotent", WithIdempotentIf(alwaysSafe)}, nil
	case len(rs) > 0:
		return fieldOption{"semantic_safety.idempotent_requests", WithIdempotentIf(rs.match)}, nil
	case op && s.Idempotent != nil:
		// An operation's idempotent: false (without side_effect: true)
		// undoes the dependency's declaration, either way; a section that
		// says nothing of it (idempotency_keys alone) keeps it.
		return fieldOption{"semantic_safety.idempotent", option("WithIdempotentIf", func(c *config) error {
			c.declaredSafe, c.notIdempotent = nil, false
			return nil
		})}, nil
	}
	return fieldOption{}, nil
}

// unsafe reports whether the section declares every request unsafe:
// side_effect: true, without idempotent: true.
func (s *semanticSafety) unsafe() bool { return !isTrue(s.Idempotent) && isTrue(s.SideEffect) }

// routes are the requests that the section declares safe, once its
// fields are checked against each other.
func (s *semanticSafety) routes() (routes, error) {
	if !isTrue(s.Idempotent) && s.SideEffect != nil && !*s.SideEffect {
		return nil, fieldErr("semantic_safety.side_effect", "false, but idempotent is not true: a request without a side effect is idempotent (write idempotent: true)")
	}
	rs, err := parseRoutes(s.IdempotentRequests)
	switch {
	case err != nil:
		return nil, fieldErr("semantic_safety.idempotent_requests", "%v", err)
	case s.unsafe() && len(rs) > 0:
		return nil, fieldErr("semantic_safety.idempotent_requests", "declares requests safe, but side_effect: true without idempotent: true declares every request unsafe: keep one")
	}
	return rs, nil
}

// isTrue reports whether a field is given, and true.
func isTrue(b *bool) bool { return b != nil && *b }

// observabilityOptions: the observability section.
func (d *policyDoc) observabilityOptions() ([]fieldOption, error) {
	ob := d.Observability
	if ob == nil {
		return nil, nil
	}
	var fos []fieldOption
	if ob.TagDependency != nil && *ob.TagDependency {
		if d.Dependency == "" {
			return nil, fieldErr("observability.tag_dependency", "true, but there is no dependency to name the Transport after")
		}
		fos = append(fos, fieldOption{"observability.tag_dependency", WithName(d.Dependency)})
	}
	fos = append(fos, ob.needs()...)
	hs, err := ob.headerOptions()
	if err != nil {
		return nil, err
	}
	return append(fos, hs...), nil
}

// needs are what emit_attempt_metric and trace_attempts say: that the
// Transport needs Metrics or an attempt hook (true), or none (false).
func (ob *observability) needs() []fieldOption {
	var fos []fieldOption
	if ob.EmitAttemptMetric != nil {
		on := *ob.EmitAttemptMetric
		fos = append(fos, fieldOption{"observability.emit_attempt_metric", option("WithMetrics", func(c *config) error {
			c.needMetrics = on
			if !on {
				c.metricsSrc = nil
			}
			return nil
		})})
	}
	if ob.TraceAttempts != nil {
		on := *ob.TraceAttempts
		fos = append(fos, fieldOption{"observability.trace_attempts", option("WithAttemptHook", func(c *config) error {
			c.needHook = on
			if !on {
				c.attemptHook = nil
			}
			return nil
		})})
	}
	return fos
}

// headerOptions are the attempt's and the deadline's headers.
func (ob *observability) headerOptions() ([]fieldOption, error) {
	var fos []fieldOption
	switch {
	case ob.AttemptHeader != nil:
		value := "{attempt}"
		if ob.AttemptHeaderValue != nil {
			value = *ob.AttemptHeaderValue
			if err := checkAttemptValue(value); err != nil {
				return nil, fieldErr("observability.attempt_header_value", "%q: %v", value, err)
			}
		}
		fos = append(fos, fieldOption{"observability.attempt_header", WithAttemptHeader(*ob.AttemptHeader, value)})
	case ob.AttemptHeaderValue != nil:
		return nil, fieldErr("observability.attempt_header_value", "set, but attempt_header is not: name the header")
	}
	if ob.CriticalityHeader != nil {
		fos = append(fos, fieldOption{"observability.criticality_header", WithCriticalityHeader(*ob.CriticalityHeader)})
	}
	if ob.DeadlineHeader != nil {
		fos = append(fos, fieldOption{"observability.deadline_header", WithDeadlineHeader(*ob.DeadlineHeader)})
	}
	return fos, nil
}

// operationsOption carries p's operations to the Transport, which builds
// one config for each in newConfig.
func (p Policy) operationsOption() (Option, error) {
	key := p.doc.transportKey()
	var ops []operation
	for i := range p.ops {
		op := &p.ops[i]
		fail := func(err error) error { return &opError{i, opErr(op, err)} }
		if k := op.transportKey(); k != "" && k != key {
			return nil, fail(fieldErr("budget, breaker, hedging, overload, observability, time_budget.connect_timeout_ms, retry.body_buffer_limit_bytes, retry.address_rotation",
				"an operation may repeat the dependency's, not change them: they apply to the Transport as a whole"))
		}
		rs, err := parseRoutes([]string{op.Match})
		if err != nil {
			return nil, fail(fieldErr("match", "%v", err))
		}
		fos, err := op.options(true)
		if err != nil {
			return nil, fail(err)
		}
		opts, err := checked(fos)
		if err != nil {
			return nil, fail(err)
		}
		name := op.Operation
		if name == "" {
			name = op.Match
		}
		opts = append(opts, option("operation", func(c *config) error { c.operation = name; return nil }))
		ops = append(ops, operation{rs, opts})
	}
	return option("operations", func(c *config) error {
		c.operations = ops
		return nil
	}), nil
}
