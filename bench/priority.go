// This file holds failsafe-go's priority contenders: its adaptive
// throttler and adaptive limiter built prioritized (BuildPrioritized,
// with a Prioritizer per client, calibrated each second, as failsafe-go's
// execution prioritization docs set one up), and how a request's
// criticality becomes a failsafe-go priority in its context.

package bench

import (
	"context"
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/priority"
)

// calibration is how often a contender's Prioritizer recomputes its
// rejection threshold: failsafe-go's docs' interval.
const calibration = time.Second

// TagFailsafe puts a request's priority in its context, where
// failsafe-go's prioritized policies read it (priority.PriorityKey;
// failsafehttp's RoundTripper hands the request's context to them):
// critical High, sheddable Low. Each permit draws a random level within
// its priority's hundred (Low 100 to 199, High 300 to 399, of 0 to 499).
func TagFailsafe(ctx context.Context, critical bool) context.Context {
	if critical {
		return priority.High.AddTo(ctx)
	}
	return priority.Low.AddTo(ctx)
}

// prioritized is a failsafe-go RoundTripper whose Prioritizer calibrates
// until it is closed.
type prioritized struct {
	http.RoundTripper
	stop context.CancelFunc
}

// Close stops the Prioritizer's calibrations.
func (p prioritized) Close() error {
	p.stop()
	return nil
}

// FailsafePriorityThrottler is FailsafeThrottler built prioritized: the
// common retry policy around an adaptive throttler with its defaults (a
// failure rate over 10% in the last minute, up to 90% rejected), per
// attempt, whose Prioritizer turns the throttler's rejection rate into a
// level below which attempts are rejected (the rate's quantile of the
// levels it admitted lately), but for one in ten, let through so that no
// level starves; a rejection is not retried.
func FailsafePriorityThrottler(p Policy) Contender {
	return Contender{Name: "failsafe-go-priority-throttler", Tag: TagFailsafe, New: func(base http.RoundTripper) http.RoundTripper {
		pr := adaptivethrottler.NewPrioritizer()
		stop := pr.ScheduleCalibrations(context.Background(), calibration)
		rp := failsafeRetry(p, adaptivethrottler.ErrExceeded)
		at := adaptivethrottler.NewBuilder[*http.Response]().HandleIf(overloaded).BuildPrioritized(pr)
		return prioritized{failsafehttp.NewRoundTripper(base, rp, at), stop}
	}}
}

// FailsafePriorityLimiter is FailsafeLimiter built prioritized: the
// common retry policy around an adaptive limiter, limits 1 to 64 from 32,
// queueing up to twice the limit, waits up to 5 s, per attempt; once the
// limit is full and its queue over the limit, its Prioritizer rejects the
// attempts below a level (the queue's rejection rate's quantile of the
// levels queued lately); a rejection is not retried.
func FailsafePriorityLimiter(p Policy) Contender {
	return Contender{Name: "failsafe-go-priority-limiter", Tag: TagFailsafe, New: func(base http.RoundTripper) http.RoundTripper {
		pr := adaptivelimiter.NewPrioritizer()
		stop := pr.ScheduleCalibrations(context.Background(), calibration)
		rp := failsafeRetry(p, adaptivelimiter.ErrExceeded)
		al := adaptivelimiter.NewBuilder[*http.Response]().
			WithLimits(1, 64, 32).
			WithQueueing(1, 2).
			WithMaxWaitTime(5 * time.Second).
			BuildPrioritized(pr)
		return prioritized{failsafehttp.NewRoundTripper(base, rp, al), stop}
	}}
}
