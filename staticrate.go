// This file holds the static rate limit, one of admission's pacers
// (pacing.go): per host, a token bucket from golang.org/x/time/rate, for
// servers that say nothing of their quota.

package retryhttp

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// WithRateLimit sends at most perSecond attempts a second to each host,
// in bursts of at most burst. An attempt over the rate waits its turn; one
// whose turn would come past its deadline ends at once with an [*Error],
// reason [GiveUpQuota], and takes no turn.
func WithRateLimit(perSecond float64, burst int) Option {
	return option("WithRateLimit", func(c *config) error {
		if perSecond <= 0 || math.IsNaN(perSecond) || math.IsInf(perSecond, 0) || burst < 1 {
			return optErr("WithRateLimit", "perSecond %v must be a finite number > 0 and burst %d at least 1", perSecond, burst)
		}
		c.rate = &rateConfig{perSecond: perSecond, burst: burst}
		return nil
	})
}

type rateConfig struct {
	perSecond float64
	burst     int
}

// staticRate is one host's token bucket.
type staticRate struct{ lim *rate.Limiter }

func (s *staticRate) init(cfg *rateConfig) {
	s.lim = rate.NewLimiter(rate.Limit(cfg.perSecond), cfg.burst)
}

// admit takes a turn: now, later (the attempt waits for it), or none, if
// it would come past the attempt's deadline.
func (s *staticRate) admit(a ask) verdictOf {
	now := time.Now()
	r := s.lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	switch {
	case d <= 0:
		return verdictOf{act: actSend, taken: taken{rsv: r}}
	case a.deadline != 0 && a.now+int64(d) >= a.deadline:
		r.CancelAt(now)
		return refuse(GiveUpQuota)
	}
	return verdictOf{act: actWait, wait: d, reason: GiveUpQuota, taken: taken{rsv: r}}
}

// undo gives back a turn taken for an attempt that is not sent.
func (s *staticRate) undo(t taken, _ time.Time) {
	if t.rsv != nil {
		t.rsv.Cancel()
	}
}

func (s *staticRate) observe(seen) change { return change{} }
