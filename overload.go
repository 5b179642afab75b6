// This file holds admission's public side: the retry Budget, the
// breaker's BreakerConfig, the pacers' options, and what a Transport's
// settings and an attempt's result become for internal/admission, which
// holds the controllers and the loop that asks them.

package retryhttp

import (
	"fmt"
	"math"
	"time"

	"github.com/retryhttp/retryhttp/internal/admission"
)

// The retry breaker's defaults and bounds, as BreakerConfig documents
// them.
const (
	defaultBreakerThreshold  = 10
	defaultFailFastProbeBase = 250 * time.Millisecond
	defaultFailFastProbeMax  = 2 * time.Second
	// maxThreshold bounds BreakerConfig.Threshold: the score is an int32,
	// and a breaker that needs more failures in a row than this never opens.
	maxThreshold = 1_000_000
)

// A Budget caps the retries sent to each destination host (req.URL.Host):
// a retry may go while it fits ratio × the host's first attempts of the
// last 10 s or, while the host is not failing, the floor of minPerSecond
// (counted over 3 s), whichever is larger. Every retry that is sent is
// charged, however it leaves, and one the budget refuses gives up at once
// with its last response. docs/overload.md gives the model and what it
// promises.
//
// A Budget is safe for concurrent use, and one Budget may be shared by
// several Transports so that they spend one allowance. Recording a first
// attempt costs one atomic operation and no lock. The zero Budget allows
// no retries at all; use NewBudget.
type Budget struct{ s admission.Share }

// NewBudget returns a Budget that lets retries to each host reach ratio ×
// its first attempts over about 10 s, or minPerSecond retries a second
// while the host is not failing. NewBudget(0.1, 10) is the default of
// every Transport.
//
// It panics if ratio or minPerSecond is negative, NaN or infinite.
func NewBudget(ratio, minPerSecond float64) *Budget {
	if err := budgetErr(ratio, minPerSecond); err != nil {
		panic(err.Error())
	}
	b := new(Budget)
	b.s.Init(ratio, minPerSecond)
	return b
}

// budgetErr is what is wrong with NewBudget's arguments, or nil: the one
// check of NewBudget and of a policy's budget section.
func budgetErr(ratio, minPerSecond float64) error {
	if ratio < 0 || math.IsNaN(ratio) || math.IsInf(ratio, 0) {
		return fmt.Errorf("retryhttp: NewBudget: ratio %v must be a finite number >= 0", ratio)
	}
	if minPerSecond < 0 || math.IsNaN(minPerSecond) || math.IsInf(minPerSecond, 0) {
		return fmt.Errorf("retryhttp: NewBudget: minPerSecond %v must be a finite number >= 0", minPerSecond)
	}
	return nil
}

// BreakerConfig configures the retry breaker (see [WithRetryBreaker]). A
// zero field takes its default.
type BreakerConfig struct {
	// Threshold opens a host's breaker: each attempt that fails in a way
	// worth retrying adds 1 to the host's health score, each answer takes
	// 2 off (down to 0), and the breaker opens when the score reaches
	// Threshold (after Threshold failures in a row, or while clearly more
	// than two attempts in three fail), once the failures have lasted
	// 10ms. Default 10; at most 1,000,000. The rules in full:
	// docs/overload.md.
	Threshold int
	// ProbeBackoff spaces the probes while retries are held: the n-th
	// probe may go ProbeBackoff.Delay(n, prev) after the last attempt to
	// the host failed, sooner the more retries are held (never under
	// 20ms). The default is a delay between a fifth and a quarter of the
	// retry schedule's length (560ms to 700ms with the defaults); with
	// FailFast, EqualJitter(250ms, 2s). A probe is a retry, charged to the
	// budget.
	ProbeBackoff Backoff
	// ProbeTimeout is how long a probe may go unanswered before it counts
	// as failed, so that a probe that hangs does not stop the next one.
	// The default, 0, is 4 times the probe's own interval, and at least
	// 100ms.
	ProbeTimeout time.Duration
	// MaxHold is the longest a retry is held. The default, 0, holds it no
	// longer than its request's backoff schedule from its first failure
	// (2.8s with the defaults), and never before its own wait ends; a
	// deadline or WithMaxElapsed ends it sooner. At its limit a held
	// retry gives up with its last response, reason "breaker", if a retry
	// or probe to the host failed since the host last answered; otherwise
	// it goes.
	MaxHold time.Duration
	// FailFast makes an open breaker refuse first attempts too: RoundTrip
	// returns at once an [*Error] for which errors.Is(err,
	// [ErrCircuitOpen]) holds, reason "circuit_open", sending nothing, so
	// that the caller can serve a fallback. One request at a time goes as
	// the probe, at ProbeBackoff or as every sixth first attempt refused.
	// A retry whose breaker is open gives up at once with its last
	// response, unless it can go as the probe.
	FailFast bool
	// OnStateChange, if set, is called when a host's breaker opens
	// (retries held; FailFast: first attempts refused) or closes (the
	// host answered), after the change, on the goroutine of the RoundTrip
	// whose attempt changed it; calls for one host come in order, never
	// at once. It must return quickly. host is in its canonical form (lower
	// case, no default port). Metrics and logs record the same changes.
	OnStateChange func(host string, open bool)
}

// WithRetryBreaker configures the retry breaker, on by default with the
// zero BreakerConfig. While a host fails or serves no one, its retries
// are held, one going as a probe at a time; an answer releases them as a
// slow start (slower if the host turns them away), not as a wave. A retry
// held to its limit gives up with its last response. State is per host
// and per Transport; the package documentation, "Admission", has the
// rules.
func WithRetryBreaker(cfg BreakerConfig) Option {
	return option("WithRetryBreaker", func(c *config) error {
		name := func(field string, v any) string { return fmt.Sprintf("WithRetryBreaker(%s: %v)", field, v) }
		switch {
		case cfg.Threshold < 0:
			return optErr(name("Threshold", cfg.Threshold), "threshold is negative")
		case cfg.Threshold > maxThreshold:
			return optErr(name("Threshold", cfg.Threshold), "threshold is above %d", maxThreshold)
		case cfg.MaxHold < 0:
			return optErr(name("MaxHold", cfg.MaxHold), "hold is negative")
		case cfg.ProbeTimeout < 0:
			return optErr(name("ProbeTimeout", cfg.ProbeTimeout), "timeout is negative")
		case cfg.ProbeBackoff != nil && isNil(cfg.ProbeBackoff):
			return optErr(fmt.Sprintf("WithRetryBreaker(ProbeBackoff: %T(nil))", cfg.ProbeBackoff), "a nil Backoff: leave the field unset for the default")
		}
		c.breaker = &cfg
		return nil
	})
}

// WithoutRetryBreaker turns the retry breaker off: every retry is sent
// when its wait ends, limited by the budget alone, and FailFast is off too.
func WithoutRetryBreaker() Option {
	return option("WithoutRetryBreaker", func(c *config) error {
		c.breaker = nil
		return nil
	})
}

// resolveBreaker fills in the defaults once the retry schedule is known.
func resolveBreaker(cfg BreakerConfig, schedule time.Duration) *BreakerConfig {
	if cfg.Threshold == 0 {
		cfg.Threshold = defaultBreakerThreshold
	}
	if cfg.ProbeBackoff == nil {
		if cfg.FailFast {
			cfg.ProbeBackoff = equalJitter{defaultFailFastProbeBase, defaultFailFastProbeMax}
		} else {
			lo := max(schedule/5, time.Millisecond)
			cfg.ProbeBackoff = uniformBackoff{lo, max(schedule/4, lo)}
		}
	}
	return &cfg
}

// WithThrottle refuses a share of first attempts to a host that refuses
// many of them (429, 502, 503, 504, a timeout, a connection error), so
// that it receives at most about ratio × what it accepts. The share
// follows the last 2 s; a refused request sends nothing and ends at once
// with an [*Error], reason [GiveUpThrottled]. Off by default; 2 is a good
// ratio, 1.25 for a host that queues bursts (docs/overload.md).
func WithThrottle(ratio float64) Option {
	return option("WithThrottle", func(c *config) error {
		if ratio < 1 || math.IsNaN(ratio) || math.IsInf(ratio, 0) {
			return optErr("WithThrottle", "ratio %v must be a finite number >= 1 (attempts sent per attempt accepted)", ratio)
		}
		c.throttle = ratio
		return nil
	})
}

// WithRateLimit sends at most perSecond attempts a second to each host,
// in bursts of at most burst. An attempt over the rate waits its turn; one
// whose turn would come past its deadline ends at once with an [*Error],
// reason [GiveUpRate], and takes no turn.
func WithRateLimit(perSecond float64, burst int) Option {
	return option("WithRateLimit", func(c *config) error {
		if perSecond <= 0 || math.IsNaN(perSecond) || math.IsInf(perSecond, 0) || burst < 1 {
			return optErr("WithRateLimit", "perSecond %v must be a finite number > 0 and burst %d at least 1", perSecond, burst)
		}
		c.rate = &admission.Rate{PerSecond: perSecond, Burst: burst}
		return nil
	})
}

// WithQuotaPacing reads the quota a host says is left (RateLimit and
// RateLimit-Policy, RateLimit- and X-RateLimit-Remaining with -Reset,
// OpenAI's and Anthropic's request counts, a 429's Retry-After) and, once
// it is spent, holds attempts to that host until it resets, plus jitter.
// An attempt that would wait past maxWait or its deadline ends at once
// with an [*Error], reason [GiveUpQuota]. With spread, the quota left is
// spread evenly over the time to its reset. Resets and windows past a
// day are ignored.
func WithQuotaPacing(maxWait time.Duration, spread bool) Option {
	return option("WithQuotaPacing", func(c *config) error {
		if maxWait <= 0 {
			return optErr("WithQuotaPacing", "maxWait %v must be > 0", maxWait)
		}
		c.quota = &admission.Quota{MaxWait: maxWait, Spread: spread}
		return nil
	})
}

// WithConcurrencyLimit limits the attempts in flight to each host: fixed
// with min == max (a bulkhead), else adaptive from max, cut by a tenth
// when the host sheds (429, 503), times out, or answers slower than its
// own spread explains, grown by one per round trip otherwise. Up to max
// attempts over the limit wait their turn, within their deadline; the
// others end at once with an [*Error], reason [GiveUpLimit].
func WithConcurrencyLimit(min, max int) Option {
	return option("WithConcurrencyLimit", func(c *config) error {
		if min < 1 || max < min || max > 1<<20 {
			return optErr("WithConcurrencyLimit", "min %d and max %d must satisfy 1 <= min <= max <= %d", min, max, 1<<20)
		}
		c.limit = &admission.Limit{Min: min, Max: max}
		return nil
	})
}

// settings are what c's options turn on in admission.
func (c *config) settings() admission.Settings {
	s := admission.Settings{Hedge: c.hedge != nil, Throttle: c.throttle, Rate: c.rate, Quota: c.quota, Limit: c.limit,
		Notify: c.breakerChanged, OnRelease: c.onRelease, OnProbe: c.onProbe}
	if c.budget != nil {
		s.Budget = &c.budget.s
	}
	if c.breaker != nil {
		b := resolveBreaker(*c.breaker, c.schedule)
		s.Breaker = &admission.Breaker{Threshold: b.Threshold, ProbeBackoff: b.ProbeBackoff, ProbeTimeout: b.ProbeTimeout,
			MaxHold: b.MaxHold, FailFast: b.FailFast, Schedule: c.schedule}
	}
	if gs := c.metrics.gauges(); gs != nil {
		for i := range s.Gauges {
			if g := gs.g[i]; g != nil {
				s.Gauges[i] = g
			}
		}
	}
	return s
}

// uniformBackoff draws every delay uniformly in [lo, hi].
type uniformBackoff struct{ lo, hi time.Duration }

func (u uniformBackoff) Delay(int, time.Duration) time.Duration { return uniform(u.lo, u.hi) }
