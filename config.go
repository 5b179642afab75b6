// This file holds the Option types and the one unexported config that
// the options resolve into, once, in New, with the defaults of the
// options of options.go; the breaker's and hedging's are in overload.go
// and hedge.go. The strategies behind WithBackoff are in backoff.go and
// the Budget behind WithBudget in overload.go; admission's own constants
// are in its controllers' files (internal/admission).

package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/internal/admission"
	"github.com/retryhttp/retryhttp/internal/rotation"

	"github.com/hashicorp/go-cleanhttp"
)

// Defaults, as documented on each option.
const (
	defaultMaxAttempts     = 4
	defaultBackoffBase     = 200 * time.Millisecond
	defaultBackoffMax      = 10 * time.Second
	defaultMaxRetryAfter   = 30 * time.Second
	defaultBodyBufferLimit = 1 << 20
	defaultBudgetRatio     = 0.1
	defaultBudgetPerSecond = 10
)

// config is what the options resolve into, once, in New.
type config struct {
	// onRelease and onProbe, if set (by the simulator), are told of every
	// held retry that a recovery releases, and whether it was lent, and of
	// every one sent as the probe.
	onRelease         func(host string, lent bool)
	onProbe           func(ctx context.Context, host string)
	dependency        string // the policy's dependency, for the logs; "" if none
	operation         string // the policy's operation (its name, or its match), for the logs
	base              http.RoundTripper
	inner             *Transport // base is itself a Transport: call it once per attempt
	markOwner         bool       // a Transport hides deeper in base: tell it by context
	plainBase         bool       // base is an *http.Transport: its dial errors mean nothing was sent
	maxAttempts       int
	backoff           Backoff
	statuses          statusSet
	customStatuses    bool
	unprocessed       statusSet // WithUnprocessedStatuses
	perAttemptTimeout time.Duration
	maxRetryAfter     time.Duration
	bodyLimit         int64
	keyMethods        methodSet
	declaredSafe      func(*http.Request) bool // WithIdempotentIf, Idempotent
	notIdempotent     bool                     // NotIdempotent: no request is repeated but with a caller's key
	keyGen            func() string
	budget            *Budget          // WithBudget
	breaker           *BreakerConfig   // WithRetryBreaker, as given; nil when disabled
	hedge             *HedgeConfig     // WithHedging, or nil
	throttle          float64          // WithThrottle's ratio, or 0
	rate              *admission.Rate  // WithRateLimit, or nil
	quota             *admission.Quota // WithQuotaPacing, or nil
	limit             *admission.Limit // WithConcurrencyLimit, or nil
	gate              *admission.Gate  // admission, built from the settings above; nil if all are off
	held              *memPool         // the memory that waiting retries' kept responses may hold
	keepLast          bool             // a waiting retry keeps its last response (held, when it gives up after its wait)
	guardFirst        bool             // a first attempt may hold something: a pacer's part, or FailFast's probe
	metricsSrc        *Metrics
	metrics           *transportMetrics // metricsSrc's series for this name
	logger            *slog.Logger
	reporting         bool                       // a retry is reported: there are metrics, a logger or an attempt hook (report.go)
	logRoute          func(*http.Request) string // WithLogRoute
	name              string
	attemptHeader     string                                                             // WithAttemptHeader's name
	attemptValue      string                                                             // and its value's template
	deadlineHeader    string                                                             // WithDeadlineHeader
	level             int8                                                               // WithCriticality: -1 sheddable, 0 default, 1 critical
	levelHeader       string                                                             // WithCriticalityHeader
	fallback          *Fallback                                                          // a policy's fallback section, or nil
	fallbackFn        func(*http.Request, *http.Response, error) (*http.Response, error) // WithFallback
	rotate            bool                                                               // WithAddressRotation
	maxElapsed        time.Duration
	retryIf           func(*http.Response, error) Decision
	schedule          time.Duration // scheduleLength of backoff and maxAttempts
	layers            *layers       // retries of the layers above, seen by this Transport
	attemptHook       func(context.Context, AttemptStart) (context.Context, func(AttemptEnd))
	freshHeader       bool // each attempt gets a copy of the header: an attempt or deadline header, or a hook that may set some
	plainAttempts     bool // an attempt's request gets nothing of the Transport's but the owner's mark: no fresh header or address rotation

	// From a Policy: what its observability section requires, the dial
	// timeout of the base to build, and its operations with their configs.
	needMetrics, needHook bool
	dialTimeout           time.Duration
	operations            []operation
	opConfigs             []*config
}

func newConfig(base http.RoundTripper, opts []Option) (*config, error) {
	if base != nil && isNil(base) {
		return nil, fmt.Errorf("retryhttp: New: the base is a nil %T: pass a nil base for the default one, or a value", base)
	}
	c := &config{
		base:          base,
		maxAttempts:   defaultMaxAttempts,
		backoff:       fullJitter{defaultBackoffBase, defaultBackoffMax},
		statuses:      defaultStatuses,
		maxRetryAfter: defaultMaxRetryAfter,
		bodyLimit:     defaultBodyBufferLimit,
		keyGen:        NewUUIDKey,
		budget:        ownBudget(),
		breaker:       &BreakerConfig{},
	}
	if err := c.validate(opts); err != nil {
		return nil, err
	}
	if err := c.build(); err != nil {
		return nil, err
	}
	return c, nil
}

// ownBudget is a Transport's default Budget, NewBudget(0.1, 10), its
// own: no option or method hands it to anyone, so its admission keeps
// each host's counts with the rest of the host's state, in one map
// (admission's Share.Own). A Budget given by WithBudget may be shared,
// and keeps its own map of hosts.
func ownBudget() *Budget {
	b := NewBudget(defaultBudgetRatio, defaultBudgetPerSecond)
	b.s.Own()
	return b
}

// validate applies opts to c and checks what they say together: every
// error, joined.
func (c *config) validate(opts []Option) error {
	var errs []error
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(c); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case c.needMetrics && c.metricsSrc == nil:
		errs = append(errs, optErr("observability.emit_attempt_metric", "true, but there is no Metrics to record into: add WithMetrics to the options"))
	case c.needHook && c.attemptHook == nil:
		errs = append(errs, optErr("observability.trace_attempts", "true, but there is no attempt hook to call: add WithAttemptHook (otelretry.Hook(otelretry.Config{}), say) to the options"))
	case c.dialTimeout > 0 && c.base != nil:
		errs = append(errs, optErr("WithDialTimeout (a policy's time_budget.connect_timeout_ms)", "sets the dial timeout of the base that New builds, but a base was given: pass a nil base, or set the timeout on your base's Dialer"))
	}
	return errors.Join(errs...)
}

// build makes what a valid c needs to serve requests: its base, its
// admission, its metrics and its operations' configs.
func (c *config) build() error {
	switch {
	case c.base == nil && c.dialTimeout > 0:
		c.base = dialingBase(c.dialTimeout)
	case c.base == nil:
		c.base = cleanhttp.DefaultPooledTransport()
	}
	if c.rotate {
		if err := c.rotationBase(); err != nil {
			return err
		}
	}
	c.inner, c.markOwner = findInner(c.base)
	switch c.base.(type) {
	case *http.Transport, *rotation.Transport: // its dial errors mean nothing was sent
		c.plainBase = true
	}
	c.schedule = scheduleLength(c.backoff, c.maxAttempts)
	c.freshHeader = c.attemptHeader != "" || c.deadlineHeader != "" || c.levelHeader != "" || c.attemptHook != nil
	c.plainAttempts = !c.freshHeader && !c.rotate
	c.layers = new(layers)
	c.held = newMemPool(defaultHeldBodyMemory)
	if c.metricsSrc != nil {
		c.metrics = c.metricsSrc.forTransport(c.name)
	}
	c.reporting = c.metrics != nil || c.logger != nil || c.attemptHook != nil
	c.gate = admission.New(c.settings())
	c.keepLast, c.guardFirst = c.admissionHolds()
	c.operationConfigs()
	return nil
}

// admissionHolds says what admission may hold of a request: a retry that
// the breaker or a pacer may give up after its wait keeps its last
// response through the wait, to return it then (keep); a first attempt
// may hold a pacer's part, or FailFast's probe, which a panic in the
// base must give back (guard).
func (c *config) admissionHolds() (keep, guard bool) {
	paced := c.throttle != 0 || c.rate != nil || c.quota != nil || c.limit != nil
	return c.breaker != nil || paced, paced || (c.breaker != nil && c.breaker.FailFast)
}

// defaultConfig serves every zero Transport: one pooled base transport and
// one Budget for them all, like http.DefaultTransport.
var defaultConfig = sync.OnceValue(func() *config {
	c, err := newConfig(nil, nil)
	if err != nil {
		panic(err)
	}
	return c
})

// scheduleLength is how long the backoff schedule of a request lasts at
// most: the sum of the backoff's upper bounds for every retry (for a
// Backoff of the user's, one draw of its delays). A retry held by the
// breaker is held no later than this after its request's first failure.
func scheduleLength(b Backoff, maxAttempts int) time.Duration {
	var sum, prev time.Duration
	for m := 1; m < maxAttempts && m <= 64; m++ {
		d := max(upperDelay(b, m, prev), 0)
		if sum > math.MaxInt64-d {
			return math.MaxInt64 // saturates: a hold's limit never wraps around
		}
		sum, prev = sum+d, d
	}
	return sum
}

// displayName is the Transport's name in logs and metrics.
func (c *config) displayName() string {
	if c.name == "" {
		return defaultName
	}
	return c.name
}

// attemptValue is the attempt header's value for attempt n of max.
func (c *config) attemptValueFor(n, max int) string {
	if c.attemptValue == "{attempt}" { // the common case, without a replacer
		return strconv.Itoa(n)
	}
	return strings.NewReplacer("{attempt}", strconv.Itoa(n), "{retry}", strconv.Itoa(n-1),
		"{max}", strconv.Itoa(max)).Replace(c.attemptValue)
}

// rotationBase makes c's base rotate addresses, or says why it cannot.
func (c *config) rotationBase() error {
	switch b := c.base.(type) {
	case *http.Transport:
		// A DialContext of the base's is kept (each address's copy calls
		// it with its address); its Dial is not used once DialContext is
		// set; its DialTLS would dial https past the address chosen.
		//lint:ignore SA1019 a base that still sets the deprecated DialTLS must be refused, not ignored
		if b.DialTLSContext != nil || b.DialTLS != nil {
			return fmt.Errorf("retryhttp: WithAddressRotation: the base dials https through its own DialTLS, where no address can be chosen: set its DialContext instead")
		}
		c.base = rotation.New(b)
		return nil
	default:
		return fmt.Errorf("retryhttp: WithAddressRotation: the base is a %T, not an *http.Transport: pass a nil base or an *http.Transport", c.base)
	}
}

// dialingBase is the base a Transport builds when a policy sets its dial
// timeout: cleanhttp's pooled transport with that timeout.
func dialingBase(timeout time.Duration) *http.Transport {
	t := cleanhttp.DefaultPooledTransport()
	t.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	return t
}

// An Option configures a Transport. New applies its options in order and
// panics, naming the option, if one of them is invalid. Options are made
// by the With functions of this package; those that may also apply to one
// request are RequestOptions.
type Option interface {
	apply(*config) error
	optionName() string
}

// A RequestOption is an Option that may also be given for one request,
// through WithRequestOptions: WithMaxAttempts, WithBackoff,
// WithRetryableStatuses, WithNonRetryableStatuses, WithPerAttemptTimeout,
// WithMaxElapsed, WithMaxRetryAfter, WithRetryIf, WithIdempotencyKeys and
// WithCriticality.
type RequestOption struct{ opt }

// opt is an option: its name, for messages, and what it sets.
type opt struct {
	name string
	set  func(*config) error
}

func (o opt) apply(c *config) error {
	if o.set == nil { // the zero RequestOption sets nothing
		return nil
	}
	return o.set(c)
}

func (o opt) optionName() string { return o.name }

func option(name string, set func(*config) error) Option { return opt{name, set} }

func requestOption(name string, set func(*config) error) RequestOption {
	return RequestOption{opt{name, set}}
}

func optErr(option string, format string, args ...any) error {
	return fmt.Errorf("retryhttp: %s: %s", option, fmt.Sprintf(format, args...))
}

// isNil reports whether v is nil or holds a nil pointer, func, map, slice
// or channel (a typed nil, which "v == nil" does not see): the one check
// of the values that New and the options require.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
