// This file holds policy as data: a Policy struct with JSON tags, written
// per dependency in a file, that turns into the Options of policy.go and
// into one named Transport per dependency.

package retryhttp

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"time"
)

// A Policy is a retry policy written as data, one per dependency: the JSON
// form of the Options it stands for. A zero field keeps the default.
// Durations are Go duration strings ("200ms", "2s").
//
//	{
//	  "max_attempts_total": 3,
//	  "backoff": "exponential_full_jitter",
//	  "initial_delay": "100ms",
//	  "max_delay": "2s",
//	  "retryable_status": [429, 502, 503, 504],
//	  "non_retryable_status": [500],
//	  "per_attempt_timeout": "800ms",
//	  "max_elapsed": "3s",
//	  "budget": {"max_retry_ratio": 0.1},
//	  "idempotency_keys": ["POST"]
//	}
type Policy struct {
	MaxAttemptsTotal int `json:"max_attempts_total,omitempty" yaml:"max_attempts_total,omitempty"` // WithMaxAttempts
	// Backoff names the strategy: exponential_full_jitter (the default),
	// exponential_equal_jitter, decorrelated_jitter, exponential, constant.
	Backoff      string   `json:"backoff,omitempty" yaml:"backoff,omitempty"`
	InitialDelay Duration `json:"initial_delay,omitempty" yaml:"initial_delay,omitempty"` // the backoff's base (constant: its delay)
	MaxDelay     Duration `json:"max_delay,omitempty" yaml:"max_delay,omitempty"`         // the backoff's cap
	// RetryableStatus replaces the statuses retried (WithRetryableStatuses);
	// NonRetryableStatus removes some from them (or from the defaults).
	RetryableStatus    []int        `json:"retryable_status,omitempty" yaml:"retryable_status,omitempty"`
	NonRetryableStatus []int        `json:"non_retryable_status,omitempty" yaml:"non_retryable_status,omitempty"`
	PerAttemptTimeout  Duration     `json:"per_attempt_timeout,omitempty" yaml:"per_attempt_timeout,omitempty"` // WithPerAttemptTimeout
	MaxElapsed         Duration     `json:"max_elapsed,omitempty" yaml:"max_elapsed,omitempty"`                 // WithMaxElapsed
	MaxRetryAfter      Duration     `json:"max_retry_after,omitempty" yaml:"max_retry_after,omitempty"`         // WithMaxRetryAfter
	Budget             *BudgetSpec  `json:"budget,omitempty" yaml:"budget,omitempty"`                           // WithBudget
	Breaker            *BreakerSpec `json:"breaker,omitempty" yaml:"breaker,omitempty"`                         // WithRetryBreaker
	IdempotencyKeys    []string     `json:"idempotency_keys,omitempty" yaml:"idempotency_keys,omitempty"`       // WithIdempotencyKeys: the methods
	// IdempotentRequests declares requests safe to repeat whatever their
	// method (WithIdempotentIf), as "METHOD pattern" entries matched with
	// path.Match against the URL path: ["POST /*/_search"].
	IdempotentRequests []string `json:"idempotent_requests,omitempty" yaml:"idempotent_requests,omitempty"`
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

// BreakerSpec is a BreakerConfig written as data.
type BreakerSpec struct {
	Disabled  bool     `json:"disabled,omitempty" yaml:"disabled,omitempty"`
	FailFast  bool     `json:"fail_fast,omitempty" yaml:"fail_fast,omitempty"`
	Threshold int      `json:"threshold,omitempty" yaml:"threshold,omitempty"`
	MaxHold   Duration `json:"max_hold,omitempty" yaml:"max_hold,omitempty"`
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

// fieldError is an error about one field of a Policy.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return "field " + e.field + ": " + e.msg }

func fieldErr(field, format string, args ...any) error {
	return &fieldError{field, fmt.Sprintf(format, args...)}
}

// Options returns the Options that p stands for, or an error that names
// the first field that is invalid. Every Option it returns is valid.
func (p Policy) Options() ([]Option, error) {
	var opts []Option
	if p.MaxAttemptsTotal < 0 {
		return nil, fieldErr("max_attempts_total", "%d is negative", p.MaxAttemptsTotal)
	}
	if p.MaxAttemptsTotal > 0 {
		opts = append(opts, WithMaxAttempts(p.MaxAttemptsTotal))
	}
	if b, err := p.backoff(); err != nil {
		return nil, err
	} else if b != nil {
		opts = append(opts, WithBackoff(b))
	}
	statuses, err := p.statuses()
	if err != nil {
		return nil, err
	}
	switch {
	case p.RetryableStatus == nil && p.NonRetryableStatus != nil:
		// The defaults less some: the keyed-409 rule stays, unless 409
		// is one of them.
		opts = append(opts, withoutStatuses(p.NonRetryableStatus))
	case statuses != nil:
		opts = append(opts, WithRetryableStatuses(statuses...))
	}
	for _, d := range []struct {
		field string
		v     Duration
		opt   func(time.Duration) Option
	}{
		{"per_attempt_timeout", p.PerAttemptTimeout, WithPerAttemptTimeout},
		{"max_elapsed", p.MaxElapsed, WithMaxElapsed},
		{"max_retry_after", p.MaxRetryAfter, WithMaxRetryAfter},
	} {
		switch {
		case d.v < 0:
			return nil, fieldErr(d.field, "%v is negative", time.Duration(d.v))
		case d.v > 0:
			opts = append(opts, d.opt(time.Duration(d.v)))
		}
	}
	for _, part := range []func() (Option, error){p.budgetOption, p.breakerOption} {
		o, err := part()
		if err != nil {
			return nil, err
		}
		if o.apply != nil {
			opts = append(opts, o)
		}
	}
	if len(p.IdempotentRequests) > 0 {
		rs, err := parseSafeRoutes(p.IdempotentRequests)
		if err != nil {
			return nil, fieldErr("idempotent_requests", "%v", err)
		}
		opts = append(opts, WithIdempotentIf(rs.match))
	}
	if len(p.IdempotencyKeys) > 0 {
		for _, m := range p.IdempotencyKeys {
			if !validHeaderName(m) { // a method is a token too; its case does not matter, as in WithIdempotencyKeys
				return nil, fieldErr("idempotency_keys", "%q is not a method", m)
			}
		}
		opts = append(opts, WithIdempotencyKeys(p.IdempotencyKeys...))
	}
	return opts, nil
}

func (p Policy) backoff() (Backoff, error) {
	base, maxd := time.Duration(p.InitialDelay), time.Duration(p.MaxDelay)
	if base < 0 {
		return nil, fieldErr("initial_delay", "%v is negative", base)
	}
	if maxd < 0 {
		return nil, fieldErr("max_delay", "%v is negative", maxd)
	}
	if p.Backoff == "" && base == 0 && maxd == 0 {
		return nil, nil
	}
	if base == 0 {
		base = DefaultBackoffBase
	}
	if maxd == 0 {
		maxd = max(DefaultBackoffMax, base)
	}
	if p.Backoff != "constant" && maxd < base {
		return nil, fieldErr("max_delay", "%v is less than initial_delay %v", maxd, base)
	}
	switch p.Backoff {
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
	return nil, fieldErr("backoff", "%q is not one of exponential_full_jitter, exponential_equal_jitter, decorrelated_jitter, exponential, constant", p.Backoff)
}

// statuses returns the statuses to retry, or nil for the defaults.
func (p Policy) statuses() ([]int, error) {
	for _, f := range []struct {
		field string
		codes []int
	}{{"retryable_status", p.RetryableStatus}, {"non_retryable_status", p.NonRetryableStatus}} {
		for _, c := range f.codes {
			if c < 100 || c > 999 {
				return nil, fieldErr(f.field, "status code %d is outside 100..999", c)
			}
		}
	}
	if p.RetryableStatus == nil && p.NonRetryableStatus == nil {
		return nil, nil
	}
	for _, c := range p.NonRetryableStatus {
		if slices.Contains(p.RetryableStatus, c) {
			return nil, fieldErr("non_retryable_status", "%d is also in retryable_status", c)
		}
	}
	codes := p.RetryableStatus
	if codes == nil {
		for c := 100; c < 1000; c++ {
			if defaultStatuses.has(c) {
				codes = append(codes, c)
			}
		}
	}
	out := []int{} // not nil: an empty list retries no status
	for _, c := range codes {
		if !slices.Contains(p.NonRetryableStatus, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// ParsePolicy decodes one Policy from JSON. Unknown fields and values of
// the wrong type are errors.
func ParsePolicy(data []byte) (Policy, error) {
	var p Policy
	err := decodeStrict(data, &p)
	var fe *fieldError
	if err == nil || errors.As(err, &fe) {
		return p, err
	}
	// A value that failed its own decoding (a duration, say) does not
	// name its field: find the field by decoding them one at a time.
	var raw map[string]json.RawMessage
	if json.Unmarshal(data, &raw) == nil {
		for _, k := range sortedKeys(raw) {
			one, _ := json.Marshal(map[string]json.RawMessage{k: raw[k]})
			var q Policy
			if e := decodeStrict(one, &q); e != nil && !errors.As(e, &fe) {
				return p, fieldErr(k, "%v", e)
			}
		}
	}
	return p, err
}

// Policies are retry policies keyed by the name of the dependency they
// apply to.
type Policies map[string]Policy

// LoadPolicies reads a JSON object of Policies keyed by dependency name,
// and checks every one: the error names the dependency and the field.
// Unknown fields and values of the wrong type are errors.
func LoadPolicies(r io.Reader) (Policies, error) {
	data, err := io.ReadAll(io.LimitReader(r, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("retryhttp: reading policies: %w", err)
	}
	raw, starts, err := dependencies(data)
	if err != nil {
		return nil, fmt.Errorf("retryhttp: policies: %w", err)
	}
	ps := make(Policies, len(raw))
	for _, name := range sortedKeys(raw) {
		p, err := ParsePolicy(raw[name])
		if err == nil {
			_, err = p.Options()
		}
		if err != nil {
			return nil, fmt.Errorf("retryhttp: policy %q: %w (the policy starts at %s)", name, located(err, data, starts[name]), lineCol(data, starts[name]))
		}
		ps[name] = p
	}
	return ps, nil
}

// dependencies splits a policies file into its dependencies' values, and
// where each starts; a dependency written twice, or data after the
// object, is an error.
func dependencies(data []byte) (map[string]json.RawMessage, map[string]int64, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, located(cmp.Or(err, errors.New("want a JSON object of dependencies")), data, 0)
	}
	raw, starts := map[string]json.RawMessage{}, map[string]int64{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, located(err, data, 0)
		}
		name, _ := tok.(string)
		if _, dup := raw[name]; dup {
			return nil, nil, fmt.Errorf("%s: dependency %q is written twice", lineCol(data, dec.InputOffset()), name)
		}
		var v json.RawMessage
		start := dec.InputOffset()
		start += int64(len(data[start:]) - len(bytes.TrimLeft(data[start:], " \t\r\n:")))
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("dependency %q: %w", name, located(err, data, start))
		}
		raw[name], starts[name] = v, start
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, located(err, data, 0)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("%s: data after the object of dependencies", lineCol(data, dec.InputOffset()))
	}
	return raw, starts, nil
}

// Transports makes one Transport per dependency over base, named after it
// (WithName), with opts first and the dependency's Policy after them, so
// that the policy wins where both set something.
func (ps Policies) Transports(base http.RoundTripper, opts ...Option) (map[string]*Transport, error) {
	out := make(map[string]*Transport, len(ps))
	for _, name := range sortedKeys(ps) {
		popts, err := ps[name].Options()
		if err != nil {
			return nil, fmt.Errorf("retryhttp: policy %q: %w", name, err)
		}
		all := append(append(append([]Option(nil), opts...), WithName(name)), popts...)
		c, err := newConfig(base, all)
		if err != nil {
			return nil, fmt.Errorf("retryhttp: policy %q: %w", name, err)
		}
		out[name] = &Transport{c: c}
	}
	return out, nil
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fieldErr(te.Field, "%s is not a %v", te.Value, te.Type)
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: data after the JSON value", lineCol(data, dec.InputOffset()))
	}
	return nil
}

// lineCol says where offset lies in data: "line 3, column 7".
func lineCol(data []byte, offset int64) string {
	offset = min(max(offset, 0), int64(len(data)))
	line := 1 + bytes.Count(data[:offset], []byte("\n"))
	col := offset - int64(bytes.LastIndexByte(data[:offset], '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}

// located adds the line and column of a JSON syntax error in data, found
// at base + its offset.
func located(err error, data []byte, base int64) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%s: %w", lineCol(data, base+se.Offset), err)
	}
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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
		return WithBudget(nil), nil
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
	case b.MaxHold < 0:
		return Option{}, fieldErr("breaker.max_hold", "%v is negative", time.Duration(b.MaxHold))
	}
	return WithRetryBreaker(BreakerConfig{Disabled: b.Disabled, FailFast: b.FailFast,
		Threshold: b.Threshold, MaxHold: time.Duration(b.MaxHold)}), nil
}
