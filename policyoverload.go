// This file turns the admission sections of a Policy (budget, breaker,
// hedging, overload) into the Options they stand for (overload.go,
// hedge.go), each field checked by its option's own check.

package retryhttp

import "strings"

// budgetOptions: the budget section, each field checked by NewBudget's
// own check.
func (d *policyDoc) budgetOptions() ([]fieldOption, error) {
	b := d.Budget
	switch {
	case b == nil:
		return nil, nil
	case b.Disabled && (b.MaxRetryRatio != nil || b.MinRetriesPerSecond != nil):
		return nil, fieldErr("budget.disabled", "true, but the budget's ratio or floor is set too: keep one")
	case b.Disabled:
		return []fieldOption{{"budget.disabled", WithoutBudget()}}, nil
	}
	ratio, floor := float64(defaultBudgetRatio), float64(defaultBudgetPerSecond)
	if b.MaxRetryRatio != nil {
		ratio = *b.MaxRetryRatio
		if err := budgetErr(ratio, 0); err != nil {
			return nil, fieldErr("budget.max_retry_ratio", "%s", strings.TrimPrefix(err.Error(), "retryhttp: "))
		}
	}
	if b.MinRetriesPerSecond != nil {
		floor = *b.MinRetriesPerSecond
		if err := budgetErr(0, floor); err != nil {
			return nil, fieldErr("budget.min_retries_per_second", "%s", strings.TrimPrefix(err.Error(), "retryhttp: "))
		}
	}
	return []fieldOption{{"budget", WithBudget(NewBudget(ratio, floor))}}, nil
}

// breakerOptions: the breaker section, each field checked alone by
// WithRetryBreaker so that its error names it, then all together.
func (d *policyDoc) breakerOptions() ([]fieldOption, error) {
	b := d.Breaker
	if b == nil {
		return nil, nil
	}
	if b.Disabled {
		if b.FailFast || b.Threshold != 0 || b.MaxHoldMS != nil {
			return nil, fieldErr("breaker.disabled", "true, but the breaker is configured too: keep one")
		}
		return []fieldOption{{"breaker.disabled", WithoutRetryBreaker()}}, nil
	}
	cfg := BreakerConfig{FailFast: b.FailFast, Threshold: b.Threshold}
	if b.MaxHoldMS != nil {
		var err error
		if cfg.MaxHold, err = millis("breaker.max_hold_ms", *b.MaxHoldMS); err != nil {
			return nil, err
		}
	}
	return []fieldOption{
		{"breaker.threshold", WithRetryBreaker(BreakerConfig{Threshold: cfg.Threshold})},
		{"breaker.max_hold_ms", WithRetryBreaker(BreakerConfig{MaxHold: cfg.MaxHold})},
		{"breaker", WithRetryBreaker(cfg)},
	}, nil
}

// hedgeOptions: the hedging section, checked as the breaker's is.
func (d *policyDoc) hedgeOptions() ([]fieldOption, error) {
	h := d.Hedging
	if h == nil {
		return nil, nil
	}
	delay, err := millis("hedging.delay_ms", h.DelayMS)
	if err != nil {
		return nil, err
	}
	return []fieldOption{
		{"hedging.delay_ms", WithHedging(HedgeConfig{Delay: delay})},
		{"hedging.percentile", WithHedging(HedgeConfig{Percentile: h.Percentile})},
		{"hedging.max_extra", WithHedging(HedgeConfig{MaxExtra: h.MaxExtra})},
		{"hedging", WithHedging(HedgeConfig{Delay: delay, Percentile: h.Percentile, MaxExtra: h.MaxExtra})},
	}, nil
}

// overloadOptions: the overload section, each pacer from its fields.
func (d *policyDoc) overloadOptions() ([]fieldOption, error) {
	o := d.Overload
	if o == nil {
		return nil, nil
	}
	var fos []fieldOption
	if o.ThrottleRatio != nil {
		fos = append(fos, fieldOption{"overload.throttle_ratio", WithThrottle(*o.ThrottleRatio)})
	}
	for _, pacer := range [...]func() (fieldOption, error){o.limitOption, o.quotaOption, o.rateOption} {
		fo, err := pacer()
		if err != nil {
			return nil, err
		}
		if fo.o != nil {
			fos = append(fos, fo)
		}
	}
	return fos, nil
}

// limitOption is the concurrency limit's, if the section sets one.
func (o *overloadSpec) limitOption() (fieldOption, error) {
	switch {
	case o.ConcurrencyMax != nil:
		lo := *o.ConcurrencyMax
		if o.ConcurrencyMin != nil {
			lo = *o.ConcurrencyMin
		}
		return fieldOption{"overload.concurrency_min, overload.concurrency_max", WithConcurrencyLimit(lo, *o.ConcurrencyMax)}, nil
	case o.ConcurrencyMin != nil:
		return fieldOption{}, fieldErr("overload.concurrency_min", "set, but concurrency_max is not: give the largest limit")
	}
	return fieldOption{}, nil
}

// quotaOption is quota pacing's, if the section sets it.
func (o *overloadSpec) quotaOption() (fieldOption, error) {
	switch {
	case o.QuotaMaxWaitMS != nil:
		wait, err := millis("overload.quota_max_wait_ms", *o.QuotaMaxWaitMS)
		if err != nil {
			return fieldOption{}, err
		}
		return fieldOption{"overload.quota_max_wait_ms", WithQuotaPacing(wait, o.QuotaSpread != nil && *o.QuotaSpread)}, nil
	case o.QuotaSpread != nil:
		return fieldOption{}, fieldErr("overload.quota_spread", "set, but quota_max_wait_ms is not: give the longest wait for a quota")
	}
	return fieldOption{}, nil
}

// rateOption is the static rate's, if the section sets one.
func (o *overloadSpec) rateOption() (fieldOption, error) {
	switch {
	case o.RatePerSecond != nil:
		burst := 1
		if o.RateBurst != nil {
			burst = *o.RateBurst
		}
		return fieldOption{"overload.rate_per_second, overload.rate_burst", WithRateLimit(*o.RatePerSecond, burst)}, nil
	case o.RateBurst != nil:
		return fieldOption{}, fieldErr("overload.rate_burst", "set, but rate_per_second is not: give the rate")
	}
	return fieldOption{}, nil
}
