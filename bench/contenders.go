// Package bench compares retryhttp with other Go retry libraries: the cost
// of their success path (success_test.go) and what they send during an
// outage (the storm command in ./storm). It is its own module, so that the
// library never depends on its peers.
package bench

import (
	"context"
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/retryhttp/retryhttp"
)

// Policy is the retry policy the contenders share where they can: the
// "common policy" of the comparison.
type Policy struct {
	MaxAttempts int
	Base, Max   time.Duration
}

// CommonPolicy is 5 attempts, waits from 100 ms to 2 s.
var CommonPolicy = Policy{MaxAttempts: 5, Base: 100 * time.Millisecond, Max: 2 * time.Second}

// Contender is a named way to make a retrying RoundTripper over a base.
// The RoundTripper that New returns, if it is an io.Closer, is closed when
// the storm's run ends.
type Contender struct {
	Name string
	New  func(base http.RoundTripper) http.RoundTripper
	// Tag marks a request's context critical or sheddable, the way the
	// library is told; nil: the contender has no criticality, and its
	// requests go untagged.
	Tag func(ctx context.Context, critical bool) context.Context
}

// TagRetryHTTP tells retryhttp a request's criticality, per request:
// Critical or Sheddable.
func TagRetryHTTP(ctx context.Context, critical bool) context.Context {
	c := retryhttp.Sheddable
	if critical {
		c = retryhttp.Critical
	}
	return retryhttp.WithRequestOptions(ctx, retryhttp.WithCriticality(c))
}

// Bare sends each request once: the baseline.
var Bare = Contender{Name: "bare", New: func(base http.RoundTripper) http.RoundTripper { return base }}

// RetryHTTP is retryhttp with its defaults.
var RetryHTTP = Contender{Name: "retryhttp", New: func(base http.RoundTripper) http.RoundTripper {
	return retryhttp.New(base)
}, Tag: TagRetryHTTP}

// RetryablehttpDefaults is go-retryablehttp with its defaults (4 retries,
// 1 s to 30 s), used as a RoundTripper.
var RetryablehttpDefaults = Contender{Name: "retryablehttp-defaults", New: func(base http.RoundTripper) http.RoundTripper {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: base}
	c.Logger = nil
	return &retryablehttp.RoundTripper{Client: c}
}}

// Retryablehttp is go-retryablehttp with the common policy.
func Retryablehttp(p Policy) Contender {
	return Contender{Name: "retryablehttp", New: func(base http.RoundTripper) http.RoundTripper {
		c := retryablehttp.NewClient()
		c.HTTPClient = &http.Client{Transport: base}
		c.Logger = nil
		c.RetryMax = p.MaxAttempts - 1
		c.RetryWaitMin, c.RetryWaitMax = p.Base, p.Max
		return &retryablehttp.RoundTripper{Client: c}
	}}
}

// Failsafe is failsafe-go's HTTP retry policy with the common policy and
// 50% jitter.
func Failsafe(p Policy) Contender {
	return Contender{Name: "failsafe-go", New: func(base http.RoundTripper) http.RoundTripper {
		return failsafehttp.NewRoundTripper(base, failsafeRetry(p))
	}}
}

// failsafeRetry is failsafe-go's HTTP retry policy with the common
// policy and 50% jitter; it does not retry the errors given (a throttler's
// or limiter's refusal).
func failsafeRetry(p Policy, final ...error) failsafe.Policy[*http.Response] {
	b := failsafehttp.NewRetryPolicyBuilder().
		WithMaxAttempts(p.MaxAttempts).
		WithBackoff(p.Base, p.Max).
		WithJitterFactor(0.5).
		ReturnLastFailure()
	if len(final) > 0 {
		b = b.AbortOnErrors(final...)
	}
	return b.Build()
}

// RetryHTTPPolicy is retryhttp with the common policy (full jitter) and its
// default budget.
func RetryHTTPPolicy(p Policy, opts ...retryhttp.Option) Contender {
	return Contender{Name: "retryhttp-policy", New: func(base http.RoundTripper) http.RoundTripper {
		o := append([]retryhttp.Option{retryhttp.WithMaxAttempts(p.MaxAttempts),
			retryhttp.WithBackoff(retryhttp.FullJitter(p.Base, p.Max))}, opts...)
		return retryhttp.New(base, o...)
	}, Tag: TagRetryHTTP}
}

// RetryHTTPFailFast is retryhttp with its defaults and a breaker that also
// refuses first attempts while a host's circuit is open.
var RetryHTTPFailFast = Contender{Name: "retryhttp+failfast", New: func(base http.RoundTripper) http.RoundTripper {
	return retryhttp.New(base, retryhttp.WithRetryBreaker(retryhttp.BreakerConfig{FailFast: true}))
}, Tag: TagRetryHTTP}

// RetryHTTPNoBreaker is retryhttp with the retry breaker off: the budget
// alone, as before the breaker was on by default.
var RetryHTTPNoBreaker = Contender{Name: "retryhttp-nobreaker", New: func(base http.RoundTripper) http.RoundTripper {
	return retryhttp.New(base, retryhttp.WithoutRetryBreaker())
}, Tag: TagRetryHTTP}

// Naive retries 5xx, 429 and errors up to 5 attempts with a fixed 1 s delay
// and no jitter: the thundering herd, written by hand.
var Naive = Contender{Name: "naive-fixed-1s", New: func(base http.RoundTripper) http.RoundTripper {
	return naive{base}
}}

type naive struct{ base http.RoundTripper }

func (n naive) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := n.base.RoundTrip(req)
		if attempt == 5 || (err == nil && resp.StatusCode < 500 && resp.StatusCode != 429) {
			return resp, err
		}
		if err == nil {
			resp.Body.Close()
		}
		t := time.NewTimer(time.Second)
		select {
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		case <-t.C:
		}
	}
}

// RetryHTTPThrottle is retryhttp with its defaults and WithThrottle(1.25).
var RetryHTTPThrottle = Contender{Name: "retryhttp+throttle", New: func(base http.RoundTripper) http.RoundTripper {
	return retryhttp.New(base, retryhttp.WithThrottle(1.25))
}, Tag: TagRetryHTTP}

// RetryHTTPThrottle2 is retryhttp with its defaults and WithThrottle(2),
// the ratio for a host that refuses bursts below its capacity.
var RetryHTTPThrottle2 = Contender{Name: "retryhttp+throttle2", New: func(base http.RoundTripper) http.RoundTripper {
	return retryhttp.New(base, retryhttp.WithThrottle(2))
}, Tag: TagRetryHTTP}

// RetryHTTPLimit is retryhttp with its defaults and an adaptive
// concurrency limit from 64 down to 1.
var RetryHTTPLimit = Contender{Name: "retryhttp+limit", New: func(base http.RoundTripper) http.RoundTripper {
	return retryhttp.New(base, retryhttp.WithConcurrencyLimit(1, 64))
}, Tag: TagRetryHTTP}

// RetryHTTPQuota is retryhttp with its defaults and quota pacing (waits
// up to 30 s for a quota to reset).
var RetryHTTPQuota = Contender{Name: "retryhttp+quota", New: func(base http.RoundTripper) http.RoundTripper {
	return retryhttp.New(base, retryhttp.WithQuotaPacing(30*time.Second, false))
}, Tag: TagRetryHTTP}

// overloaded is what the failsafe-go contenders count as a failure for
// their throttler and limiter: what retryhttp's pacers count as a host's
// refusal (429, 502, 503, 504, an error).
func overloaded(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	switch resp.StatusCode {
	case 429, 502, 503, 504:
		return true
	}
	return false
}

// FailsafeThrottler is failsafe-go's retry policy (the common policy)
// around its adaptive throttler with its defaults (a failure rate over
// 10% in the last minute starts rejections, up to 90%), per attempt; a
// rejection is not retried.
func FailsafeThrottler(p Policy) Contender {
	return Contender{Name: "failsafe-go+throttler", New: func(base http.RoundTripper) http.RoundTripper {
		rp := failsafeRetry(p, adaptivethrottler.ErrExceeded)
		at := adaptivethrottler.NewBuilder[*http.Response]().HandleIf(overloaded).Build()
		return failsafehttp.NewRoundTripper(base, rp, at)
	}}
}

// FailsafeLimiter is failsafe-go's retry policy (the common policy)
// around its adaptive limiter, limits 1 to 64 from 32, with queueing (up
// to twice the limit, waits up to 5 s), per attempt; a rejection is not
// retried.
func FailsafeLimiter(p Policy) Contender {
	return Contender{Name: "failsafe-go+limiter", New: func(base http.RoundTripper) http.RoundTripper {
		rp := failsafeRetry(p, adaptivelimiter.ErrExceeded)
		al := adaptivelimiter.NewBuilder[*http.Response]().
			WithLimits(1, 64, 32).
			WithQueueing(1, 2).
			WithMaxWaitTime(5 * time.Second).
			Build()
		return failsafehttp.NewRoundTripper(base, rp, al)
	}}
}
